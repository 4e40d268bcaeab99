#!/usr/bin/env python3
"""A large synthetic tagging corpus in CRFsuite's attribute format, for the scale benchmark.

Sentences of 5-40 tokens whose labels follow a sparse Markov chain over --labels labels (each
label has a few likely successors, as POS tags do). Each token has a word drawn from a Zipf law
over a vocabulary, tied to its label (a word mostly occurs with one or two labels), and CRFsuite-
style attributes around it: the words at -2..2, the two word bigrams around the token, and a
suffix. The long tail of words and bigrams gives millions of attributes, most seen with one
label: the shape of real tagging data, where the observed (attribute, label) pairs are a small
fraction of attributes x labels.

Deterministic for a given --seed. Example (the benchmark's corpus, ~2 M tokens):
    python3 benchmarks/synthetic_corpus.py --tokens 2000000 --labels 45 -o /tmp/synthetic.txt
"""
import argparse
import bisect
import itertools
import random
import sys


def zipf_cdf(n, s):
    weights = [1.0 / (k ** s) for k in range(1, n + 1)]
    return list(itertools.accumulate(weights))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2_000_000)
    ap.add_argument("--labels", type=int, default=45)
    ap.add_argument("--vocabulary", type=int, default=1_500_000, help="distinct words")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()
    if a.labels < 2 or a.tokens < 1 or a.vocabulary < a.labels:
        sys.exit("synthetic_corpus.py: need --labels >= 2, --tokens >= 1, --vocabulary >= --labels")
    rng = random.Random(a.seed)
    L, V = a.labels, a.vocabulary
    # Label chain: each label has 4 likely successors and a small chance of any other.
    succ = [[rng.randrange(L) for _ in range(4)] for _ in range(L)]
    # Words: rank r of label y's Zipf law is word (r * L + y) % V; 10% of tokens take a word of
    # a neighbouring label (ambiguity).
    cdf = zipf_cdf(V // L, 1.05)
    total = cdf[-1]

    def word(y):
        if rng.random() < 0.1:
            y = (y + 1) % L
        r = bisect.bisect_left(cdf, rng.random() * total)
        return (r * L + y) % V

    written = 0
    with open(a.output, "w") as out:
        y = rng.randrange(L)
        while written < a.tokens:
            n = min(rng.randint(5, 40), a.tokens - written)
            labels = []
            for _ in range(n):
                y = rng.choice(succ[y]) if rng.random() < 0.9 else rng.randrange(L)
                labels.append(y)
            words = [word(lab) for lab in labels]
            for t in range(n):
                attrs = []
                for o in (-2, -1, 0, 1, 2):
                    if 0 <= t + o < n:
                        attrs.append(f"w[{o}]={words[t + o]}")
                if t > 0:
                    attrs.append(f"w[-1]|w[0]={words[t - 1]}|{words[t]}")
                if t + 1 < n:
                    attrs.append(f"w[0]|w[1]={words[t]}|{words[t + 1]}")
                attrs.append(f"suf={words[t] % 5000}")
                if t == 0:
                    attrs.append("__BOS__")
                if t == n - 1:
                    attrs.append("__EOS__")
                out.write(f"L{labels[t]}\t" + "\t".join(attrs) + "\n")
            out.write("\n")
            written += n


if __name__ == "__main__":
    main()
