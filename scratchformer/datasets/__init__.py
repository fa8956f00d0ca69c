"""Many inputs at once: corpora (one input a line, JSONL/CSV with a `source` field, or a bundled task's
sentences) and pairs files for patching sweeps (a clean input, its corruption, and optionally the answer and
wrong tokens). Each reader goes through its file once, line by line, and says in one sentence which line is
wrong.

- lines.py      a file's lines, decoded one at a time (non-UTF-8 bytes named by line), and its records (JSONL
                objects or CSV rows)
- corpus.py     read_corpus(spec, limit): a list of input texts
- corruption.py the corrupt_word rule: word I of a sentence replaced by another (I=WORD)
- pairs.py      read_pairs(path): a list of PairSpec
"""
