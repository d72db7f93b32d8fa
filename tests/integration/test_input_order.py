"""--stream-input-order: fairseq's length-sorted batches, or the input's own order (Hoang2018's
top-up batching is reported without maxi-batch sorting)."""
from omegaconf import open_dict


def _ids(itr):
    """The sentence ids of each batch of the session's iterator (the collater orders a batch's
    rows by length itself: only which sentences share a batch is the input order's doing)."""
    return [sorted(sample["id"].tolist()) for sample in itr]


def test_as_given_batches_follow_the_input_and_sorted_ones_its_lengths(demo_session, demo_sources):
    data = demo_session.encode(demo_sources[:10])
    as_given = _ids(demo_session.batches(data, None, 4, 1, input_order="as-given"))
    ranked = _ids(demo_session.batches(data, None, 4, 1, input_order="sorted"))
    assert as_given == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert sorted(i for b in ranked for i in b) == list(range(10)) and ranked != as_given
    lengths = [[int(data.src_sizes[i]) for i in b] for b in ranked]
    assert all(max(a) <= min(b) for a, b in zip(lengths, lengths[1:]))  # fairseq's order: by source length


def test_the_task_reads_the_option_from_its_config(demo_session, demo_sources):
    """fairseq-generate's route: the task's own --stream-input-order, no keyword."""
    data = demo_session.encode(demo_sources[:6])
    cfg = demo_session.task.cfg
    with open_dict(cfg):
        cfg.stream_input_order = "as-given"
    try:
        itr = demo_session.task.get_batch_iterator(dataset=data, max_sentences=3, required_batch_size_multiple=1)
        assert [b.tolist() for b in itr.frozen_batches] == [[0, 1, 2], [3, 4, 5]]
    finally:
        with open_dict(cfg):
            cfg.stream_input_order = "sorted"


def test_the_closing_line_confirms_int8_weights_and_the_input_order(demo_session, demo_sources):
    """Nothing else in a run's output shows that --quantize int8 or --stream-input-order as-given acted."""
    data = demo_session.encode(demo_sources[:3])
    plain = demo_session.translate(data, search="var-stream", gen={"beam": 2}, postprocess=False)
    assert plain.stats.settings == {} and "quantize" not in plain.stats.summary()
    changed = demo_session.translate(data, search="var-stream", gen={"beam": 2}, postprocess=False,
                                     opts={"quantize": "int8", "stream_input_order": "as-given"})
    line = changed.stats.summary()
    from fairseq_stream.ops.int8_rows import kernel_name

    int8 = f"int8 ({kernel_name()})"  # the statistics name the int8 kernel: "s8 x per-row 8-bit activations"
    assert line.endswith(f"quantize={int8}, input order=as-given"), line
    assert changed.stats.to_dict()["settings"] == {"quantize": int8, "input order": "as-given"}
