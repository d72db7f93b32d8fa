"""The IBDecoder family (Zhang2020): target orders and masks, the ``transformer_ib`` model, the ``translation_ib`` task.

Its decoder, the multi-word beam, is the ``ib-beam`` strategy (:mod:`fairseq_stream.strategies.ib_beam`).
"""
