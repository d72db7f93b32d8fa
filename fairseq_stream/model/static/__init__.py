"""The static decoder step (``--step-mode static|graph``): shapes fixed per bucket, so that a step can be
one CUDA graph replay.

The first GPU run found the engine host-bound (docs/history/results-2026-11.md, "On a GPU: the first run"): a
decoder step was ~130 kernel launches and ~100 allocations issued from Python, ~8 ms of host
time for ~0.8 ms of GPU work. A CUDA graph replays a recorded sequence of kernels in one launch,
but only over the *same* buffers and shapes. The parts that make a step's shapes depend on a bucket
only, one module each:

* :mod:`~fairseq_stream.model.static.buckets` — rows on a geometric ladder, finer past 512 rows
  (``row_bucket``), cache slots on a doubling one (``length_bucket``); rows past the live ones are
  padding rows (masked, never read back);
* :mod:`~fairseq_stream.model.static.slabs` — every layer's self-attention keys and values of a group in
  one stacked buffer ``(rows bucket, 2·layers, heads, slots bucket, head dim)``, lent (a ``Lease``) as a
  view at the start of one of a few *slabs* of a ``StaticCachePool`` and given back when no cache refers
  to it, so that every bucket has the same few addresses and their captured graphs are replayed again
  and again;
* :mod:`~fairseq_stream.model.static.streams` — what one stream writes between steps (its encoder slots,
  each bucket's input and output buffers, the logits of every row bucket in one buffer) is a
  ``StreamBuffers`` set the stream holds while it has sentences in flight and hands back when it drains
  (``StreamBufferSets``), so that two streams stepping one model alternately never share one, and the
  next run reuses the last one's;
* :mod:`~fairseq_stream.model.static.graphs` — ``StepGraphs`` captures the step of each key once
  (buffers, bucket, block width) into one shared memory pool and replays it afterwards, at most
  ``limit`` graphs (least recently used evicted); a step it cannot capture runs the same static code
  eagerly, with one warning line a run saying why;
* :mod:`~fairseq_stream.model.static.modes` — the ``--step-mode`` values and ``StepModeStats``, how a
  generator's steps ran (captures and evictions count in the statistics of the generator whose step
  made them);
* :mod:`~fairseq_stream.model.static.tail` — the ``RegionTail`` protocol: what a strategy runs inside the
  region after the decoder (its output layer, and its search step); ``RegionOutput``, what it returned;
  ``StepScores``, what a strategy's step is given;
* :mod:`~fairseq_stream.model.static.inputs` — a row bucket's input and output buffers (``StaticIO``), the
  rows' inputs written into them between steps, the block mask, and the last step (``Chain``) whose
  buffers a region gathers what travels with a row from;
* :mod:`~fairseq_stream.model.static.region` — ``StaticStep``, the step itself: a
  :class:`~fairseq_stream.model.block_decoder.BlockDecoder`'s layers over a static cache's whole buffer,
  with the last step's cache reorder, the rows' inputs and the strategy's tail in the same *region*
  (what one graph replays).

What is kept on the model across runs (the pool, the idle buffer sets, the graphs: held by the model's
``BlockDecoder``) is bounded by LRU rules, so a long-running session decoding inputs of many sizes does
not grow without bound.

The changes of the live set (refill, finished sentences, a beam changing its width, Jacobi accepting a
block) happen between steps as index operations on these buffers (``RowCache.select``/``concat``/
``accept``, :mod:`fairseq_stream.model.row_cache`), or inside the next step's region (a reorder).
"""
