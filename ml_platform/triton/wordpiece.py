"""BERT WordPiece tokenization with NumPy and the standard library only.

Ships beside the text ensemble's ``preprocess`` model (``preprocess/1/wordpiece.py``), so
that the stock Triton container (no ``transformers``, no ``tokenizers``) can tokenize
with the ``vocab.txt`` and ``tokenizer_config.json`` bundled in the archive. Nothing here
may import anything beyond NumPy and the standard library.

The rules are those of BERT's tokenizer as the Hugging Face fast tokenizer
(``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece`` + the ``[CLS] A [SEP]`` template)
applies them, in this order:

1. special tokens (``[CLS]``, ``[SEP]``, ``[PAD]``, ``[MASK]``, ``[UNK]``) written in the
   text are kept whole, not normalised;
2. clean-up: drop ``\\x00``, ``\\ufffd`` and control characters (categories ``C*`` except
   tab, newline and carriage return); every whitespace character becomes a space;
3. CJK ideographs are surrounded by spaces (``tokenize_chinese_chars``);
4. accents are stripped (NFD, then drop non-spacing marks) if ``strip_accents`` is true,
   or if it is unset and ``do_lower_case`` is true;
5. lower-casing, character by character (``do_lower_case``);
6. split on whitespace, then every punctuation character (Unicode ``P*`` and all ASCII
   non-alphanumeric printable characters) becomes a word of its own;
7. greedy longest-match-first WordPiece per word, continuations prefixed ``##``; a word
   longer than ``max_input_chars_per_word`` (100) or with no match becomes ``[UNK]``;
8. ``[CLS]`` + pieces truncated to ``max_length - 2`` + ``[SEP]``, padded with ``[PAD]``.

Character classes come from the running Python's ``unicodedata`` (Unicode 13.0 on Python
3.10, 14.0 on 3.11, 15.0 on 3.12), the reference's from tables of Unicode 8.0. They agree
on every character of Unicode 8.0 (checked code point by code point against tokenizers
0.23); a mark, punctuation or format character assigned later (e.g. U+061D ARABIC END OF
TEXT MARK, Unicode 14.0) is unassigned, so a letter, to the reference and tokenizes
differently here.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

VOCAB_FILE = "vocab.txt"
CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_JSON = "tokenizer.json"
MAX_INPUT_CHARS_PER_WORD = 100
CONTINUING_SUBWORD_PREFIX = "##"

# BERT's CJK ranges: the CJK Unified Ideographs blocks and their extensions and
# compatibility ideographs (not Hangul, Hiragana or Katakana).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),  # sic: the reference starts this range at 0x2B920
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# Unicode's White_Space property (what the reference tokenizer tests), besides " ".
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r\x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
)

# Dropped as control characters: control, format, private use, surrogate (not unassigned).
_CONTROL = frozenset(("Cc", "Cf", "Co", "Cs"))
# Raw text is cut at ASCII spaces into pieces of about this many characters, so that a text
# far longer than ``max_length`` tokens is only normalised as far as it is needed.
_CHUNK = 2_048
# Per-character caches stop growing here (the input is untrusted text).
_CACHE_LIMIT = 1 << 16


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True  # every printable ASCII non-alphanumeric counts, e.g. "$", "^", "`"
    return unicodedata.category(char).startswith("P")


class _CharMap(dict[int, str | None]):
    """A ``str.translate`` table computed on first use of each character."""

    def __init__(self, rule: Callable[[str], str | None]) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, code: int) -> str | None:
        value = self.rule(chr(code))
        if len(self) < _CACHE_LIMIT:
            self[code] = value
        return value


def _clean(char: str) -> str:
    if char in " \t\n\r":
        return " "
    if char in "\x00\ufffd" or unicodedata.category(char) in _CONTROL:
        return ""  # before the whitespace test: "\x0b", "\x0c" and "\x85" are dropped
    if char in _WHITESPACE:
        return " "
    return char


def _clean_cjk(char: str) -> str:
    char = _clean(char)
    return f" {char} " if char and _is_cjk(ord(char)) else char


def _lower_split(char: str) -> str:
    """Lower-case one character (no context rules such as final sigma, as the reference)
    and put spaces around punctuation."""
    return "".join(f" {c} " if _is_punctuation(c) else c for c in char.lower())


def _split(char: str) -> str:
    return f" {char} " if _is_punctuation(char) else char


def _strip_mark(char: str) -> str | None:
    return None if unicodedata.category(char) == "Mn" else char


def _chunks(text: str) -> Iterator[str]:
    """``text`` cut after ASCII spaces into pieces of about ``_CHUNK`` characters. A space is
    a word boundary at every step of the normalisation, so the cuts change no token."""
    start = 0
    while len(text) - start > _CHUNK:
        cut = text.find(" ", start + _CHUNK)
        if cut < 0:
            break
        yield text[start : cut + 1]
        start = cut + 1
    yield text[start:]


class WordPieceTokenizer:
    """BERT tokenizer over a WordPiece vocabulary; see the module docstring for the rules."""

    def __init__(
        self,
        vocab: dict[str, int],
        *,
        do_lower_case: bool = True,
        strip_accents: bool | None = None,
        tokenize_chinese_chars: bool = True,
        unk_token: str = "[UNK]",
        cls_token: str = "[CLS]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        special_tokens: tuple[str, ...] = (),
        max_input_chars_per_word: int = MAX_INPUT_CHARS_PER_WORD,
        continuing_subword_prefix: str = CONTINUING_SUBWORD_PREFIX,
    ) -> None:
        missing = [t for t in (unk_token, cls_token, sep_token, pad_token) if t not in vocab]
        if missing:
            raise ValueError(f"special tokens {missing} are not in the vocabulary")
        self.vocab = vocab
        self.lower_case = do_lower_case
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents
        self.chinese_chars = tokenize_chinese_chars
        self.unk_token = unk_token
        self.unk_id = vocab[unk_token]
        self.cls_id = vocab[cls_token]
        self.sep_id = vocab[sep_token]
        self.pad_id = vocab[pad_token]
        # Longest first, so that a special token is never cut by a shorter one it contains.
        specials = {unk_token, cls_token, sep_token, pad_token, *special_tokens}
        self.special_tokens = tuple(sorted((t for t in specials if t in vocab), key=len)[::-1])
        self.max_chars = max_input_chars_per_word
        self.prefix = continuing_subword_prefix
        self._clean = _CharMap(_clean_cjk if tokenize_chinese_chars else _clean)
        self._strip = _CharMap(_strip_mark)
        self._final = _CharMap(_lower_split if do_lower_case else _split)
        self._word_pieces: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_dir(cls, folder: str | Path) -> WordPieceTokenizer:
        """Load ``vocab.txt`` and the settings of ``tokenizer_config.json`` (and, when
        present, ``tokenizer.json``'s WordPiece model and special tokens) from ``folder``."""
        folder = Path(folder)
        vocab: dict[str, int] = {}
        with (folder / VOCAB_FILE).open(encoding="utf-8") as handle:
            for index, line in enumerate(handle):
                vocab.setdefault(line.rstrip("\n"), index)
        config_path = folder / CONFIG_FILE
        config = json.loads(config_path.read_text("utf-8")) if config_path.is_file() else {}
        # Keyword arguments of __init__, by name (values of the types it declares).
        options: dict[str, Any] = {
            "do_lower_case": bool(config.get("do_lower_case", True)),
            "strip_accents": config.get("strip_accents"),
            "tokenize_chinese_chars": bool(config.get("tokenize_chinese_chars", True)),
        }
        specials = []
        for key in ("unk_token", "cls_token", "sep_token", "pad_token", "mask_token"):
            value = config.get(key)
            if isinstance(value, dict):  # AddedToken serialised as a dict
                value = value.get("content")
            if isinstance(value, str):
                specials.append(value)
                if key != "mask_token":
                    options[key] = value
        fast_path = folder / TOKENIZER_JSON
        if fast_path.is_file():
            fast = json.loads(fast_path.read_text("utf-8"))
            model = fast.get("model") or {}
            if "max_input_chars_per_word" in model:
                options["max_input_chars_per_word"] = int(model["max_input_chars_per_word"])
            if "continuing_subword_prefix" in model:
                options["continuing_subword_prefix"] = model["continuing_subword_prefix"]
            normalizer = fast.get("normalizer") or {}
            if normalizer.get("type") == "BertNormalizer":
                options["do_lower_case"] = bool(normalizer.get("lowercase", True))
                options["strip_accents"] = normalizer.get("strip_accents")
                options["tokenize_chinese_chars"] = bool(
                    normalizer.get("handle_chinese_chars", True)
                )
            specials.extend(t["content"] for t in fast.get("added_tokens", []) if t.get("special"))
        return cls(vocab, special_tokens=tuple(specials), **options)

    # -- normalisation and pre-tokenisation ---------------------------------------------

    def _words(self, text: str) -> list[str]:
        """Normalise ``text`` and split it into words (punctuation split off)."""
        text = text.translate(self._clean)
        if self.strip_accents and not text.isascii():
            text = unicodedata.normalize("NFD", text).translate(self._strip)
        return text.translate(self._final).split()

    # -- WordPiece ----------------------------------------------------------------------

    def _pieces(self, word: str) -> tuple[int, ...]:
        cached = self._word_pieces.get(word)
        if cached is not None:
            return cached
        pieces: list[int] = []
        if len(word) > self.max_chars:
            pieces = [self.unk_id]
        else:
            start, vocab = 0, self.vocab
            while start < len(word):
                end = len(word)
                found = None
                while start < end:
                    piece = word[start:end]
                    if start > 0:
                        piece = self.prefix + piece
                    found = vocab.get(piece)
                    if found is not None:
                        break
                    end -= 1
                if found is None:
                    pieces = [self.unk_id]
                    break
                pieces.append(found)
                start = end
        result = tuple(pieces)
        if len(self._word_pieces) < 100_000:  # bounded: requests are untrusted text
            self._word_pieces[word] = result
        return result

    def _segments(self, text: str) -> Iterator[tuple[bool, str]]:
        """``(is_special, text)`` parts: special tokens written in the text stay whole."""
        if not any(token in text for token in self.special_tokens):
            yield False, text
            return
        start = index = 0
        while index < len(text):
            for token in self.special_tokens:
                if text.startswith(token, index):
                    if start < index:
                        yield False, text[start:index]
                    yield True, token
                    index += len(token)
                    start = index
                    break
            else:
                index += 1
        if start < len(text):
            yield False, text[start:]

    def token_ids(self, text: str, limit: int | None = None) -> list[int]:
        """Word-piece ids of ``text`` without ``[CLS]``/``[SEP]``; at most ``limit`` of them
        (the rest of a long text is not tokenized at all)."""
        ids: list[int] = []
        for special, segment in self._segments(text):
            if special:
                ids.append(self.vocab[segment])
            else:
                for chunk in _chunks(segment):
                    for word in self._words(chunk):
                        ids.extend(self._pieces(word))
                    if limit is not None and len(ids) >= limit:
                        return ids[:limit]
            if limit is not None and len(ids) >= limit:
                return ids[:limit]
        return ids

    def tokenize(self, text: str) -> list[str]:
        """The word pieces of ``text`` as strings (for inspection)."""
        inverse = {i: t for t, i in self.vocab.items()}
        return [inverse[i] for i in self.token_ids(text)]

    def encode(self, texts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
        """``input_ids`` and ``attention_mask`` (int64 ``[len(texts), max_length]``):
        ``[CLS]`` + pieces truncated to ``max_length - 2`` + ``[SEP]``, then ``[PAD]``."""
        if max_length < 2:
            raise ValueError(f"max_length={max_length}: must be at least 2 ([CLS] and [SEP])")
        ids = np.full((len(texts), max_length), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), max_length), dtype=np.int64)
        for row, text in enumerate(texts):
            pieces = [self.cls_id, *self.token_ids(text, max_length - 2), self.sep_id]
            ids[row, : len(pieces)] = pieces
            mask[row, : len(pieces)] = 1
        return ids, mask
