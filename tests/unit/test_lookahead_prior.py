"""The lookahead prior (search/lookahead_prior.py, tools/lookahead_prior.py): what it counts, what it
guesses, and the one-line refusals of a file that does not belong to the run."""
from __future__ import annotations

import os

import pytest
import torch

from conftest import DEMO
from fairseq.data import Dictionary
from fairseq_stream.errors import FairseqStreamError
from fairseq_stream.search.lookahead_prior import count_prior, dictionary_digest, load_prior, save_prior
from fairseq_stream.tools import lookahead_prior as tool

BOS, PAD = 0, 1


@pytest.fixture(scope="module")
def dictionary():
    d = Dictionary()
    for w in "a b c d e".split():
        d.add_symbol(w)
    return d


def _ids(d, text):
    return [d.index(w) for w in text.split()] + [d.eos()]


def test_the_most_frequent_continuation_of_one_token_and_of_two(dictionary):
    d = dictionary
    sentences = [_ids(d, "a b c d"), _ids(d, "a b c d"), _ids(d, "e b e a")]
    prior = count_prior(sentences, ngram=3, dictionary=d, bos=BOS)
    one = {int(row[0]): row[1:].tolist() for row in prior.unigram}
    a, b, c, e = (d.index(w) for w in "a b c e".split())
    assert one[BOS] == [a, b]  # twice, against "e b" once
    assert one[b] == [c, d.index("d")]  # after b: "c d" twice, "e a" once
    assert one[e] == [b, e]  # the first seen of two continuations seen once each
    # two tokens: (e, b) → "e a", where one token (b) says "c d"
    guesses = prior.bigram_guesses(torch.tensor([e, a, -1]), torch.tensor([b, b, b]), PAD)
    assert guesses.tolist() == [[e, a], [c, d.index("d")], [PAD, PAD]]  # a row with no previous token: none
    assert prior.bigram_guesses(torch.tensor([c]), torch.tensor([a]), PAD).tolist() == [[PAD, PAD]]  # never seen
    fewer = count_prior(sentences, ngram=3, dictionary=d, bos=BOS, min_count=2)
    assert {int(row[0]) for row in fewer.unigram} == {BOS, a, b, c}  # keys whose best was seen twice


def test_a_file_round_trips_and_is_refused_where_it_does_not_belong(dictionary, tmp_path):
    d = dictionary
    prior = count_prior([_ids(d, "a b c d e")], ngram=3, dictionary=d, bos=BOS)
    path = str(tmp_path / "p.pt")
    save_prior(prior, path)
    back = load_prior(path, ngram=3, dictionary=d)
    assert torch.equal(back.unigram, prior.unigram) and torch.equal(back.bigram, prior.bigram)
    assert back.bigram_keys.dtype == torch.long and back.digest == dictionary_digest(d)
    with pytest.raises(FairseqStreamError, match="counted for --lookahead-ngram 3, the run has 4"):
        load_prior(path, ngram=4, dictionary=d)
    other = Dictionary()
    other.add_symbol("z")
    with pytest.raises(FairseqStreamError, match="another target dictionary"):
        load_prior(path, ngram=3, dictionary=other)
    with pytest.raises(FairseqStreamError, match="no such file"):
        load_prior(str(tmp_path / "none.pt"), ngram=3, dictionary=d)
    (tmp_path / "cut.pt").write_bytes(open(path, "rb").read()[:100])
    with pytest.raises(FairseqStreamError, match="not a readable lookahead prior"):
        load_prior(str(tmp_path / "cut.pt"), ngram=3, dictionary=d)
    torch.save({"model": {}}, str(tmp_path / "ckpt.pt"))
    with pytest.raises(FairseqStreamError, match="not a lookahead prior"):
        load_prior(str(tmp_path / "ckpt.pt"), ngram=3, dictionary=d)


def test_the_tool_counts_a_text_with_the_models_dictionary(tmp_path, capsys):
    text = tmp_path / "out.en"
    text.write_text("In the beginning , God cre@@ ated the heavens\n\nIn the beginning was the Word\n",
                    encoding="utf-8")
    out = str(tmp_path / "prior.pt")
    tool.main(["--dict", os.path.join(DEMO, "dict.en.txt"), "--text", str(text), "--ngram", "4", "--out", out])
    assert "from 2 sentences, N = 4" in capsys.readouterr().out  # the blank line is no sentence
    prior = load_prior(out, ngram=4, dictionary=Dictionary.load(os.path.join(DEMO, "dict.en.txt")))
    d = Dictionary.load(os.path.join(DEMO, "dict.en.txt"))
    assert prior.bigram_guesses(torch.tensor([d.index("In")]), torch.tensor([d.index("the")]), d.pad()).tolist() == \
        [[d.index("beginning"), d.index(","), d.index("God")]]
    with pytest.raises(FairseqStreamError, match="no sentences"):
        empty = tmp_path / "empty.en"
        empty.write_text("\n", encoding="utf-8")
        tool.main(["--dict", os.path.join(DEMO, "dict.en.txt"), "--text", str(empty), "--out", out])
