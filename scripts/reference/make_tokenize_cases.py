#!/usr/bin/env python3
"""make_tokenize_cases.py - differential test cases for codesweep's tokenizer.

Writes random texts built from the pieces NLTK's word_tokenize treats specially
(abbreviations, initials, numbers, ellipses, quotes, brackets, contractions,
sentence starters, newlines) with the official builder's tokenize_nltk output
and NLTK's Punkt sentence spans, as JSON lines {"text", "tokens", "sentences"}.

Usage (NLTK 3.10 with punkt_tab/english, e.g. from scripts/fetch-punkt-english.sh):
  NLTK_DATA=/path/with/tokenizers/punkt_tab/english \
  python3 scripts/reference/make_tokenize_cases.py --n 600 --seed 0 \
      > tasks/tests/data/tokenize_cases.jsonl
"""
import argparse
import json
import random
import re

from nltk.tokenize import PunktTokenizer, word_tokenize

PIECES = [
    "Mr.", "Mrs.", "Dr.", "U.S.", "U.S.A.", "e.g.", "i.e.", "etc.", "Inc.", "Corp.", "Jan.", "St.",
    "J.", "A.", "B.", "b.", "x.", "3.", "B. Edelman", "3. business", "J. Walter", "J. walter", "1990.", "-3.", "1,000.5", "12.", "no.", "vs.", "ok.",
    "The", "the", "But", "but", "However", "It", "it", "Smith", "York", "Bach", "Edelman", "Apple", "Levine", "business", "dividend", "who", "Who",
    "year", "years", "yet", "i", "I", "This", "this", "Some", "Since", "under",
    "doesn't", "can't", "won't", "don't", "cannot", "CANNOT", "gonna", "gotta", "wanna", "gimme",
    "lemme", "more'n", "d'ye", "'tis", "'twas", "I'm", "you'll", "we've", "they're", "he'd", "it's",
    "...", "..", ". . .", "--", "-", "?", "!", "?!", ",", ":", ";", "(", ")", "[", "]", "{", "}",
    "\"", "'", "''", "``", "`", "«", "»", "“", "”", "‘", "’", "*", "@", "#", "$", "%", "&",
    "x.y", "a.b.c", "__init__", "self.value", "foo()", "bar(x)", "i++", "a=b", "//", "/*", "*/",
    "café", "naïve", "x²", "a\u0301b", "\u2014", "\u2013", "10:30", "3,4", "a,b",
]
SPACES = [" ", " ", " ", "  ", "\n", "\n\n", "\t", ""]


def tokenize_nltk(text):
    out = []
    for w in word_tokenize(text):
        out.extend(re.findall(r"\w+", w))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    punkt = PunktTokenizer("english")
    for _ in range(args.n):
        parts = []
        for _ in range(rng.randint(1, 24)):
            parts.append(rng.choice(PIECES))
            parts.append(rng.choice(SPACES))
        text = "".join(parts)
        for case in (text, text.lower()):
            row = {"text": case, "tokens": tokenize_nltk(case),
                   "sentences": [case[s:e] for s, e in punkt.span_tokenize(case)]}
            print(json.dumps(row, ensure_ascii=False))


if __name__ == "__main__":
    main()
