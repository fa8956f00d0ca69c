"""The Python API keeps the precision a run was opened in: `run.diff("other")` opens the other model as
`scratchformer diff --precision` does, not in float32 whatever the run said (issue 42)."""

from __future__ import annotations

import torch

import scratchformer as sf
from scratchformer import api

EOT = 50256


def _bfloat16_folder(directory):
    """A one-layer random Llama saved by transformers in bfloat16, with GPT-2's tokenizer (offline)."""
    import transformers

    from scratchformer.loading.tokenizers import gpt2_tokenizer

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=50257, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      bos_token_id=EOT, eos_token_id=EOT)  # fmt: skip
    model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(directory))
    gpt2_tokenizer().hf.save_pretrained(str(directory))
    return directory


def test_diff_opens_the_other_model_in_the_runs_precision(tmp_path, monkeypatch):
    folder = str(_bfloat16_folder(tmp_path / "llama"))
    opened = []
    real = api.load_model

    def recording(spec, device="cpu", **kw):
        opened.append(kw.get("precision", "float32"))
        return real(spec, device, **kw)

    monkeypatch.setattr(api, "load_model", recording)
    narrow = sf.run(folder, "machine learning", precision="stored")
    assert narrow.precision == "stored"
    assert {p.dtype for p in narrow.bundle.model.parameters()} == {torch.bfloat16}
    same = narrow.diff(folder, tolerance=0)
    assert opened == ["stored", "stored"]
    # the same bfloat16 weights through the same bfloat16 arithmetic: no step differs at all
    assert same["first_difference"] is None and not same["parameters"]
    wide = sf.run(folder, "machine learning")
    assert wide.precision == "float32" and wide.diff(folder, tolerance=0)["first_difference"] is None
    assert opened == ["stored", "stored", "float32", "float32"]
    # what the bug did: a float32 model beside a bfloat16 run differs in the first steps that compute anything
    assert narrow.diff(wide, tolerance=0)["first_difference"] is not None
    assert len(opened) == 4  # another Run is compared as it is, never opened again
