"""The one-line messages name the real cause (the command-line cases are in test_bad_input.py)."""
import pickle
import sys

from fairseq_stream import errors


def test_a_size_mismatch_is_blamed_on_the_dictionaries_not_the_checkpoint():
    exc = RuntimeError("Error(s) in loading state_dict for TransformerModel:\n\tsize mismatch for "
                       "decoder.embed_tokens.weight: copying a param with shape torch.Size([6024, 256]) from "
                       "checkpoint, the shape in current model is torch.Size([5004, 256]).")
    line = errors._dictionary_problem(exc)
    assert "[6024, 256] in the checkpoint but [5004, 256]" in line and "dictionaries" in line
    assert errors._dictionary_problem(RuntimeError("something else")) is None


def test_corrupt_and_unsafe_pickles_are_told_apart():
    corrupt = pickle.UnpicklingError("Weights only load failed. ... WeightsUnpickler error: \n\nUnsupported operand 238")
    unsafe = pickle.UnpicklingError("Weights only load failed. ...\n\nTrying to load unsupported GLOBAL posix.system "
                                    "whose module posix is blocked.")
    assert "corrupt" in errors.unpickling_problem(corrupt) and "TORCH_FORCE" not in errors.unpickling_problem(corrupt)
    assert "posix.system" in errors.unpickling_problem(unsafe) and "TORCH_FORCE" in errors.unpickling_problem(unsafe)


def test_a_missing_language_model_names_lm_path(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["fairseq-generate", "data", "--path", "a.pt", "--lm-path", "/x/lm.pt"])
    assert errors._missing_model_flag("Model file not found: /x/lm.pt") == "--lm-path"
    assert errors._missing_model_flag("Model file not found: a.pt") == "--path"


def test_hydras_missing_value_becomes_the_flags_to_pass():
    class ConfigCompositionException(Exception):
        pass

    line = errors._config_problem(ConfigCompositionException("Error merging override tokenizer.source_lang=null"))
    assert line == ("--tokenizer needs --source-lang and --target-lang, which fairseq does not infer for it; "
                    "pass --source-lang and --target-lang")
