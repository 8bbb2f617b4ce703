"""The dependency-free WordPiece tokenizer against the Hugging Face tokenizer of the model.

The corpus is generated deterministically (seeded) from pools of characters in long-
established Unicode blocks; see ``ml_platform/triton/wordpiece.py`` for the one known
difference (characters assigned after Unicode 8.0, which the reference does not know).
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ml_platform.triton.wordpiece import WordPieceTokenizer
from tests.helpers.triton_support import MINILM_DIR

CORPUS_SIZE = 1_200
SEED = 20261201


def _chars(*ranges: tuple[int, int]) -> str:
    return "".join(chr(c) for low, high in ranges for c in range(low, high + 1))


POOLS = {
    "ascii": _chars((0x61, 0x7A), (0x41, 0x5A), (0x30, 0x39)),
    "latin": _chars((0xC0, 0xFF), (0x100, 0x17F), (0x1E00, 0x1EFF)),
    "greek": _chars((0x391, 0x3A1), (0x3A3, 0x3C9), (0x386, 0x386), (0x388, 0x38A)),
    "cyrillic": _chars((0x400, 0x45F)),
    "arabic": _chars((0x621, 0x64A), (0x660, 0x669)),
    "hebrew": _chars((0x5D0, 0x5EA)),
    "devanagari": _chars((0x905, 0x939), (0x93E, 0x94D)),
    "thai": _chars((0xE01, 0xE2E)),
    "hangul": _chars((0xAC00, 0xAC40), (0xD500, 0xD520)),
    "kana": _chars((0x3041, 0x3096), (0x30A1, 0x30FA)),
    "cjk": _chars((0x4E00, 0x4E80), (0x6C00, 0x6C40), (0x3400, 0x3420), (0xF900, 0xF910)),
    "combining": _chars((0x300, 0x34E)),
    "emoji": _chars((0x1F600, 0x1F64F), (0x1F300, 0x1F320), (0x2600, 0x2610))
    + _chars((0x1F3FB, 0x1F3FF))  # skin tones
    + "\u200d\ufe0f",  # zero-width joiner, emoji presentation selector
    "control": _chars((0x0, 0x1F), (0x7F, 0x9F)) + "\u200b\u200e\ufeff\u00ad\ufffd\ue000",
    "space": " \t\n\r\x0b\x0c\x85\xa0\u1680\u2002\u2003\u2009\u202f\u205f\u2028\u2029\u3000",
    "punct": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»‘’“”„—–…·•†‡‰′″‹›"
    + "、。「」『』【】〈〉！？，．：；",
    "symbols": "©®™°±×÷§¶€£¥¢¤µ¼½¾²³¹←→↑↓∑∞≈≠≤≥√∂∫",
}
WORDS = (
    "the quick brown fox jumps over lazy dog unaffable tokenization running playing "
    "Triton endpoint ensemble résumé naïve café Zürich São Paulo Ελληνικά Москва "
    "東京 北京 서울 こんにちは مرحبا שלום नमस्ते สวัสดี COVID-19 e-mail don't U.S.A."
).split()


def _word(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(WORDS)
    if roll < 0.55:  # numbers in their usual shapes
        return rng.choice(
            [
                str(rng.randint(0, 10 ** rng.randint(1, 12))),
                f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 6)}f}",
                f"{rng.randint(1, 999)},{rng.randint(0, 999):03d},{rng.randint(0, 999):03d}",
                f"{rng.randint(0, 100)}%",
                f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                hex(rng.getrandbits(32)),
            ]
        )
    pool = POOLS[rng.choice(list(POOLS))]
    word = "".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
    if rng.random() < 0.2:  # letters followed by combining accents
        word = "".join(c + rng.choice(POOLS["combining"]) for c in word)
    return word


def sentence(rng: random.Random, index: int) -> str:
    """One sentence; every 50th of the special shapes comes up in turn."""
    special = index % 50
    if special == 0:
        return ""
    if special == 1:
        blanks = POOLS["space"] + POOLS["control"]
        return "".join(rng.choice(blanks) for _ in range(rng.randint(1, 20)))
    if special == 2:  # far longer than max_seq_len
        return " ".join(_word(rng) for _ in range(rng.randint(300, 900)))
    if special == 3:  # punctuation runs
        return "".join(rng.choice(POOLS["punct"]) for _ in range(rng.randint(5, 60)))
    if special == 4:  # words around the 100-character WordPiece limit
        return f"{'a' * 99} {'b' * 100} {'c' * 101} {'ab' * 60}"
    if special == 5:  # special tokens written in the text, and look-alikes
        return rng.choice(
            [
                "[CLS] hello [SEP] world [MASK]",
                "a[SEP]b[PAD]",
                "[cls] [Sep] [UNK]x",
                "[[MASK]]",
                "[UNK][UNK]",
            ]
        )
    separators = POOLS["space"] if rng.random() < 0.2 else " "
    return "".join(
        _word(rng) + (rng.choice(separators) if i < 30 else "") for i in range(rng.randint(1, 40))
    )


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    rng = random.Random(SEED)
    return [sentence(rng, i) for i in range(CORPUS_SIZE)]


@pytest.fixture(scope="module")
def reference(monkeypatch_module):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(MINILM_DIR), local_files_only=True)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        yield patch


@pytest.fixture(scope="module")
def ours() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_dir(MINILM_DIR)


def assert_same(reference, ours: WordPieceTokenizer, texts: list[str], max_length: int) -> None:
    expected = reference(
        texts, padding="max_length", truncation=True, max_length=max_length, return_tensors="np"
    )
    ids, mask = ours.encode(texts, max_length)
    bad = np.nonzero(
        (ids != expected["input_ids"]).any(axis=1)
        | (mask != expected["attention_mask"]).any(axis=1)
    )[0]
    assert not len(bad), [
        (texts[i][:80], expected["input_ids"][i][:12].tolist(), ids[i][:12].tolist())
        for i in bad[:5]
    ]


def test_corpus_is_varied(corpus: list[str]) -> None:
    counts = Counter("".join(corpus))
    assert len(corpus) >= 1_000 and corpus.count("") >= 20
    assert sum(len(t) > 2_000 for t in corpus) >= 20  # far beyond 128 tokens
    for pool in ("latin", "cjk", "emoji", "control", "combining", "hangul", "arabic", "punct"):
        assert sum(counts[c] for c in set(POOLS[pool])) > 100, pool
    assert counts["\x00"] and counts["\ufffd"]


def test_same_ids_and_mask_as_hugging_face(reference, ours, corpus) -> None:
    assert_same(reference, ours, corpus, 128)
    assert_same(reference, ours, corpus[:200], 9)  # truncation inside most sentences


def test_rules_on_known_cases(ours: WordPieceTokenizer) -> None:
    assert ours.tokenize("Héllo, WORLD!") == ["hello", ",", "world", "!"]
    assert ours.tokenize("unaffable") == ["una", "##ffa", "##ble"]
    assert ours.tokenize("東京タワー") == ["東", "京", "タ", "##ワ", "##ー"]
    assert ours.tokenize("a\x00b\ufffdc\u200bd") == ours.tokenize("abcd") == ["abc", "##d"]
    assert ours.tokenize("$5^2`x") == ["$", "5", "^", "2", "`", "x"]
    assert ours.tokenize("x" * 100) != ["[UNK]"] and ours.tokenize("x" * 101) == ["[UNK]"]
    assert ours.tokenize("hi [SEP] [sep]") == ["hi", "[SEP]", "[", "sep", "]"]
    ids, mask = ours.encode(["", "a b c d e"], 4)
    assert ids.tolist() == [[101, 102, 0, 0], [101, 1037, 1038, 102]]
    assert mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]


@pytest.mark.parametrize(
    "settings",
    [
        {"do_lower_case": False},
        {"do_lower_case": True, "strip_accents": False},
        {"do_lower_case": True, "tokenize_chinese_chars": False},
    ],
)
def test_follows_the_bundled_tokenizer_config(
    tmp_path: Path, monkeypatch_module, corpus: list[str], settings: dict
) -> None:
    """Without tokenizer.json, the settings come from tokenizer_config.json alone."""
    from transformers import AutoTokenizer

    shutil.copy(MINILM_DIR / "vocab.txt", tmp_path / "vocab.txt")
    config = json.loads((MINILM_DIR / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, **settings}))
    reference = AutoTokenizer.from_pretrained(str(tmp_path), local_files_only=True)
    normalizer = json.loads(reference.backend_tokenizer.normalizer.__getstate__())
    assert normalizer["lowercase"] is settings["do_lower_case"]  # the reference took them too
    ours = WordPieceTokenizer.from_dir(tmp_path)
    assert ours.lower_case is settings["do_lower_case"]
    assert_same(reference, ours, corpus[:300], 64)
