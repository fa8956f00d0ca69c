"""A folder's own tokenizer, exactly: for every family that opens, a folder saved with a tokenizer that is not
the family's usual one (a word-level or WordPiece vocabulary of its own, as people who train small models save
them) gives the same ids as transformers.AutoTokenizer on the same folder — never the family's BPE silently — and
the encoder reads the text wrapped in exactly the special tokens that tokenizer's post-processor adds (none when
it has none, [CLS] … [SEP] when it says so), not the family's usual ones."""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import (
    AutoTokenizer,
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    GPT2Config,
    GPT2LMHeadModel,
    MarianConfig,
    MarianMTModel,
    MBartConfig,
    MBartForConditionalGeneration,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaModel,
    T5Config,
    T5ForConditionalGeneration,
)

from scratchformer.loading.bundle import load_model

SPECIALS = ["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>", "<pad>", "<unk>"]
WORDS = "the girl eats an apple today and we are friends".split()
VOCAB = SPECIALS + WORDS  # 19 entries
TEXT = "the girl eats an apple today"
IDS = {w: i for i, w in enumerate(VOCAB)}


def own_tokenizer(kind: str) -> PreTrainedTokenizerFast:
    """A word-level or WordPiece tokenizer of our own, saved the way `tokenizers` users save one."""
    if kind == "wordpiece":
        model = models.WordPiece(IDS, unk_token="[UNK]")
    else:
        model = models.WordLevel(IDS, unk_token="[UNK]")
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if kind == "wordpiece":  # this one wraps every text in [CLS] … [SEP]; the word-level one adds nothing
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", IDS["[CLS]"]), ("[SEP]", IDS["[SEP]"])]
        )
    specials = dict(unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                    bos_token="<s>", eos_token="</s>")  # fmt: skip
    return PreTrainedTokenizerFast(tokenizer_object=tok, **specials)


SMALL = dict(vocab_size=len(VOCAB))
FAMILIES = {
    "gpt2": lambda: GPT2LMHeadModel(GPT2Config(**SMALL, n_positions=32, n_embd=16, n_layer=1, n_head=2,
                                               bos_token_id=IDS["<s>"], eos_token_id=IDS["</s>"])),
    "bert": lambda: BertModel(BertConfig(**SMALL, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=24, max_position_embeddings=32, pad_token_id=1)),
    "distilbert": lambda: DistilBertModel(DistilBertConfig(**SMALL, dim=16, n_layers=1, n_heads=2, hidden_dim=24,
                                                           max_position_embeddings=32, pad_token_id=1)),
    "roberta": lambda: RobertaModel(RobertaConfig(**SMALL, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                                  intermediate_size=24, max_position_embeddings=40, pad_token_id=1,
                                                  bos_token_id=IDS["<s>"], eos_token_id=IDS["</s>"])),
    "bart": lambda: BartForConditionalGeneration(BartConfig(
        **SMALL, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=32, pad_token_id=1, bos_token_id=IDS["<s>"],
        eos_token_id=IDS["</s>"], decoder_start_token_id=IDS["</s>"], forced_eos_token_id=IDS["</s>"])),
    "mbart": lambda: MBartForConditionalGeneration(MBartConfig(
        **SMALL, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=32, pad_token_id=1, bos_token_id=IDS["<s>"],
        eos_token_id=IDS["</s>"], decoder_start_token_id=IDS["</s>"])),
    "t5": lambda: T5ForConditionalGeneration(T5Config(
        **SMALL, d_model=16, d_kv=8, d_ff=24, num_layers=1, num_heads=2, pad_token_id=1, eos_token_id=IDS["</s>"],
        decoder_start_token_id=1)),
    "marian": lambda: MarianMTModel(MarianConfig(
        **SMALL, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=32, pad_token_id=1, eos_token_id=IDS["</s>"],
        decoder_start_token_id=1, forced_eos_token_id=IDS["</s>"])),
}  # fmt: skip


@pytest.mark.parametrize("kind", ["word-level", "wordpiece"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_folder_with_its_own_tokenizer_reads_as_autotokenizer_reads_it(tmp_path, family, kind):
    torch.manual_seed(0)
    FAMILIES[family]().save_pretrained(str(tmp_path), safe_serialization=True)
    own_tokenizer(kind).save_pretrained(str(tmp_path))
    auto = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    bundle = load_model(str(tmp_path))
    expected = auto.encode(TEXT, add_special_tokens=False)
    assert expected == [IDS[w] for w in TEXT.split()]  # the folder's own words, each its own id
    for tok in (bundle.src_tokenizer, bundle.tgt_tokenizer):
        assert tok.encode(TEXT) == expected, family
        assert tok.token_strings(expected) == TEXT.split()  # shown as the words they are
    if bundle.config.has_encoder:  # the encoder reads what AutoTokenizer gives, its special tokens included
        wrapped = [IDS["[CLS]"], *expected, IDS["[SEP]"]] if kind == "wordpiece" else expected
        assert auto(TEXT)["input_ids"] == wrapped
        assert bundle.encode_source(TEXT) == wrapped, family
    assert bundle.src_tokenizer.unknown_words("the girl eats a pear") == ["a", "pear"]
