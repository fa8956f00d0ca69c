"""scratchformer's dictionaries beside SAELens's own code (issue 44): SAELens opens the folders scratchformer writes
and scratchformer opens the folders SAELens writes, and on the same weights and inputs both give the same features
and reconstructions (within 1e-5).

SAELens runs in its own environment, .venv-saelens (scripts/saelens-env.sh, which scripts/test.sh runs after
set-up): it needs TransformerLens 3 and some fifty packages scratchformer does not. Its side is
tests/scratchformer/saelens_side.py, one process per test module answering jobs; the two sides exchange only
folders and safetensors files.
"""

import json
import os
import select
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from scratchformer.cli import main
from scratchformer.features.activations import corpus_texts, gather
from scratchformer.features.dictionary import Dictionary, DictionaryInfo
from scratchformer.features.folder import load, save
from scratchformer.features.training import TrainSettings, train
from scratchformer.loading.bundle import load_model

ROOT = Path(__file__).resolve().parents[2]
SAELENS_PYTHON = ROOT / ".venv-saelens" / "bin" / "python"
SIDE = Path(__file__).with_name("saelens_side.py")
POINT = "decoder.1.add_norm3.out"
TOLERANCE = 1e-5
# our architecture and kind → SAELens's name and the class it opens the folder as
SAELENS_NAMES = {("topk", "sae"): ("topk", "TopKSAE"), ("jumprelu", "sae"): ("jumprelu", "JumpReLUSAE"),
                 ("standard", "sae"): ("standard", "StandardSAE"),
                 ("standard", "transcoder"): ("transcoder", "Transcoder"),
                 ("jumprelu", "transcoder"): ("jumprelu_transcoder", "JumpReLUTranscoder")}  # fmt: skip
CASES = list(SAELENS_NAMES)


class SAELensSide:
    """The SAELens process: ask(op=…, …) sends one job and returns its answer."""

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile("w+")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled", "TQDM_DISABLE": "1"}
        self.proc = subprocess.Popen([str(SAELENS_PYTHON), str(SIDE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env=env, cwd=tempfile.gettempdir())  # fmt: skip
        self.version = self._answer(240)["sae_lens"]  # importing SAELens (and TransformerLens) takes a while

    def _answer(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.log.seek(0)
            tail = self.log.read()[-3000:]
            why = "it stopped" if self.proc.poll() is not None else "timed out"
            pytest.fail(f"SAELens's process gave no answer ({why}); its last words:\n{tail}", pytrace=False)
        answer = json.loads(line)
        if "error" in answer:
            pytest.fail(f"SAELens refused the job: {answer['error']}", pytrace=False)
        return answer["ok"]

    def ask(self, **job) -> dict:
        self.proc.stdin.write(json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in job.items()}) + "\n")
        self.proc.stdin.flush()
        return self._answer(240)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)
        self.log.close()


@pytest.fixture(scope="module")
def saelens():
    if not SAELENS_PYTHON.exists():
        pytest.fail("SAELens's environment .venv-saelens is missing: `bash scripts/saelens-env.sh` makes it "
                    "(scripts/test.sh runs it after set-up).", pytrace=False)  # fmt: skip
    side = SAELensSide()
    yield side
    side.close()


@pytest.fixture(scope="module")
def bundle():
    return load_model("en-hi")


def random_dictionary(arch: str, kind: str, d_in=16, d_sae=40, d_out=24, k=5, seed=0) -> Dictionary:
    g = torch.Generator().manual_seed(seed)
    d = Dictionary(d_in, d_sae, arch, k, d_out if kind == "transcoder" else None,
                   DictionaryInfo("blocks.0.ln2.hook_normalized", "blocks.0.hook_mlp_out" if kind == "transcoder"
                                  else "blocks.0.ln2.hook_normalized", "a-model", kind))  # fmt: skip
    with torch.no_grad():
        for p in (d.W_enc, d.W_dec, d.b_enc, d.b_dec):
            p.copy_(torch.randn(p.shape, generator=g))
        d.threshold.copy_(torch.rand(d_sae, generator=g) * 0.5)
    return d


def inputs(tmp_path: Path, x: torch.Tensor) -> Path:
    path = tmp_path / "x.safetensors"
    save_file({"x": x.contiguous()}, str(path))
    return path


def saelens_outputs(saelens: SAELensSide, folder: Path, x: torch.Tensor, tmp_path: Path) -> tuple[dict, dict]:
    out = tmp_path / "saelens-out.safetensors"
    said = saelens.ask(op="run", folder=folder, inputs=inputs(tmp_path, x), out=out)
    return said, load_file(str(out))


def assert_same(d: Dictionary, theirs: dict, x: torch.Tensor, rtol: float = 0.0) -> None:
    """Our features and reconstruction of x equal SAELens's: the same features fire, with the same values (within
    TOLERANCE, plus rtol of the value where the two compute in another order)."""
    with torch.no_grad():
        f = d.encode(x)
        recon = d.decode(f)
    assert torch.equal(f > 0, theirs["features"] > 0), "a different set of features fires"
    assert (f > 0).any(), "no feature fired: the comparison would say nothing"
    torch.testing.assert_close(f, theirs["features"], atol=TOLERANCE, rtol=rtol)
    torch.testing.assert_close(recon, theirs["recon"], atol=TOLERANCE, rtol=rtol)


# --- on the same weights ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("arch", "kind"), CASES)
def test_saelens_opens_our_folder_and_gives_our_features(saelens, tmp_path, arch, kind):
    d = random_dictionary(arch, kind)
    save(d, tmp_path / "ours")
    x = torch.randn(3, 7, d.d_in, generator=torch.Generator().manual_seed(1))  # (batch, pos, d_in)
    said, theirs = saelens_outputs(saelens, tmp_path / "ours", x, tmp_path)
    name, cls = SAELENS_NAMES[(arch, kind)]
    assert (said["architecture"], said["class"]) == (name, cls)
    assert (said["d_in"], said["d_sae"], said["hook_name"]) == (16, 40, "blocks.0.ln2.hook_normalized")
    assert said["apply_b_dec_to_input"] is (kind == "sae")
    assert theirs["recon"].shape == (3, 7, d.d_out)
    assert_same(d, theirs, x)


@pytest.mark.parametrize(("arch", "kind"), CASES)
def test_we_open_a_folder_saelens_wrote_and_give_its_features(saelens, tmp_path, arch, kind):
    name, cls = SAELENS_NAMES[(arch, kind)]
    said = saelens.ask(op="make", architecture=name, d_in=16, d_sae=40, d_out=24, k=5, seed=2,
                       folder=tmp_path / "theirs")  # fmt: skip
    assert said["class"] == cls
    d = load(tmp_path / "theirs")
    assert (d.architecture, d.info.kind, d.d_in, d.d_sae, d.d_out) == (arch, kind, 16, 40, 24 if kind == "transcoder"
                                                                          else 16)  # fmt: skip
    x = torch.randn(4, 5, 16, generator=torch.Generator().manual_seed(3))
    assert_same(d, saelens_outputs(saelens, tmp_path / "theirs", x, tmp_path)[1], x)


def test_a_saelens_topk_that_ranks_by_decoder_norm_opens_here_with_its_features(saelens, tmp_path):
    """SAELens's TopK trainer (rescale_acts_by_decoder_norm, its default) writes checkpoints whose decoder rows are
    not unit length: it ranks pre · ‖W_dec,i‖ and decodes f / ‖W_dec,i‖. Opened here, the norms are folded in."""
    saelens.ask(op="make", architecture="topk", rescale=True, d_in=16, d_sae=40, k=5, seed=6, folder=tmp_path / "t")
    d = load(tmp_path / "t")
    assert torch.allclose(d.W_dec.norm(dim=1), torch.ones(40))
    x = torch.randn(4, 5, 16, generator=torch.Generator().manual_seed(7))
    # the folded weights multiply in another order: values of about 100 agree to a few parts in 10⁷
    assert_same(d, saelens_outputs(saelens, tmp_path / "t", x, tmp_path)[1], x, rtol=1e-6)


def test_a_batchtopk_dictionary_trained_here_runs_in_saelens_as_the_jumprelu_it_is_stored_as(saelens, tmp_path):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2048, 16, generator=g) @ torch.randn(16, 16, generator=g)
    d = Dictionary(16, 48, "batchtopk", 4, info=DictionaryInfo("blocks.0.hook_resid_post", "blocks.0.hook_resid_post"))
    train(d, x, None, TrainSettings(width=48, k=4, architecture="batchtopk", steps=40, batch_tokens=256))
    assert bool(d.threshold.any()), "training left no threshold: the dictionary would not run as a JumpReLU"
    save(d, tmp_path / "ours")
    said, theirs = saelens_outputs(saelens, tmp_path / "ours", x[:300], tmp_path)
    assert (said["architecture"], said["class"]) == ("jumprelu", "JumpReLUSAE")
    assert_same(d, theirs, x[:300])


def test_saelens_batchtopk_training_opens_here_as_a_jumprelu_with_its_features(saelens, tmp_path):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2048, 16, generator=g) @ torch.randn(16, 16, generator=g)
    said = saelens.ask(op="train_batchtopk", inputs=inputs(tmp_path, x), d_sae=48, k=4, steps=40,
                       folder=tmp_path / "theirs")  # fmt: skip
    assert said["threshold"] > 0
    d = load(tmp_path / "theirs")
    assert d.architecture == "jumprelu" and torch.allclose(d.threshold, torch.full((48,), said["threshold"]))
    assert_same(d, saelens_outputs(saelens, tmp_path / "theirs", x[:300], tmp_path)[1], x[:300])


# --- trained here, on a bundled model ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "extra", "reads", "saelens_name"), [
    ("sae", [], POINT, "topk"),
    ("transcoder", ["--to", "decoder.1.ffn.out"], "decoder.1.add_norm2.out", "jumprelu_transcoder"),
])  # fmt: skip
def test_a_dictionary_trained_by_the_command_line_loads_in_saelens_with_the_same_features(
    saelens, bundle, tmp_path, kind, extra, reads, saelens_name
):
    out = tmp_path / kind
    assert main(["features", "train", "--model", "en-hi", "--at", reads, *extra, "--kind", kind, "--corpus",
                 "task:en-hi", "--out", str(out), "--tokens", "5000", "--width", "64", "--k", "4", "--steps", "50",
                 "--json", "--quiet"]) == 0  # fmt: skip
    texts = corpus_texts("task:en-hi", 2000)[-40:]  # inputs the dictionary never trained on
    x = gather(bundle, texts, [reads], 2**30)[reads]  # (tokens, 128) real activations of en-hi
    said, theirs = saelens_outputs(saelens, out, x, tmp_path)
    assert (said["architecture"], said["d_in"], said["d_sae"], said["hook_name"]) == (saelens_name, 128, 64, reads)
    assert_same(load(out), theirs, x)
