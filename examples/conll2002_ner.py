#!/usr/bin/python3
"""Spanish named-entity recognition (CoNLL-2002) from Python, as sklearn-crfsuite's tutorial does
it: per-token feature dicts with the word's shape and suffixes and its neighbours — features a
CRF++ template cannot express — trained with crfx.CRF (L-BFGS, c1 = c2 = 0.1, 100 iterations,
every label bigram). Reports the tutorial's figure (F1 over the entity labels, weighted by their
support) and conlleval's entity F1 (crfx eval), and the same for the chunking template through
the crfx tool on the same data, with both training times.

    PYTHONPATH=build/python examples/conll2002_ner.py [DATA_DIR] [CRFX_BINARY]

DATA_DIR defaults to ../shared/data/conll2002, CRFX_BINARY to build/crfx.
"""
import os
import subprocess
import sys
import tempfile
import time

import crfx

here = os.path.dirname(os.path.abspath(__file__))
data_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "shared", "data", "conll2002")
binary = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "build", "crfx")


def read_conll(path):
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields:
                if current:
                    sentences.append(current)
                current = []
            elif not fields[0].startswith("-DOCSTART-"):
                current.append(fields)
    if current:
        sentences.append(current)
    return sentences


def word2features(sent, i):
    """sklearn-crfsuite's tutorial features, unchanged."""
    word, postag = sent[i][0], sent[i][1]
    features = {
        "bias": 1.0,
        "word.lower()": word.lower(),
        "word[-3:]": word[-3:],
        "word[-2:]": word[-2:],
        "word.isupper()": word.isupper(),
        "word.istitle()": word.istitle(),
        "word.isdigit()": word.isdigit(),
        "postag": postag,
        "postag[:2]": postag[:2],
    }
    if i > 0:
        word1, postag1 = sent[i - 1][0], sent[i - 1][1]
        features.update({
            "-1:word.lower()": word1.lower(),
            "-1:word.istitle()": word1.istitle(),
            "-1:word.isupper()": word1.isupper(),
            "-1:postag": postag1,
            "-1:postag[:2]": postag1[:2],
        })
    else:
        features["BOS"] = True
    if i < len(sent) - 1:
        word1, postag1 = sent[i + 1][0], sent[i + 1][1]
        features.update({
            "+1:word.lower()": word1.lower(),
            "+1:word.istitle()": word1.istitle(),
            "+1:word.isupper()": word1.isupper(),
            "+1:postag": postag1,
            "+1:postag[:2]": postag1[:2],
        })
    else:
        features["EOS"] = True
    return features


def weighted_f1(gold, predicted, labels):
    """sklearn's flat f1_score(average='weighted') over `labels`, in plain Python."""
    g = [l for s in gold for l in s]
    p = [l for s in predicted for l in s]
    total, score = 0, 0.0
    for label in labels:
        tp = sum(1 for a, b in zip(g, p) if a == label and b == label)
        support = sum(1 for a in g if a == label)
        guessed = sum(1 for b in p if b == label)
        f1 = 2 * tp / (support + guessed) if support + guessed else 0.0
        score += f1 * support
        total += support
    return score / total if total else 0.0


def conlleval_f1(path):
    report = subprocess.run([binary, "eval", path], check=True, capture_output=True, text=True).stdout
    return float(report.split("FB1:")[1].split()[0])


train = read_conll(os.path.join(data_dir, "esp.train"))
test = read_conll(os.path.join(data_dir, "esp.testb"))
X_train = [[word2features(s, i) for i in range(len(s))] for s in train]
y_train = [[t[-1] for t in s] for s in train]
X_test = [[word2features(s, i) for i in range(len(s))] for s in test]
y_test = [[t[-1] for t in s] for s in test]

crf = crfx.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True)
start = time.monotonic()
crf.fit(X_train, y_train)
seconds = time.monotonic() - start
y_pred = crf.predict(X_test)
labels = sorted((l for l in crf.classes_ if l != "O"), key=lambda name: (name[1:], name[0]))

with tempfile.TemporaryDirectory() as tmp:
    tagged = os.path.join(tmp, "python.tagged")
    with open(tagged, "w", encoding="utf-8") as f:
        for sent, gold, pred in zip(test, y_test, y_pred):
            for token, g, p in zip(sent, gold, pred):
                f.write(f"{token[0]} {g} {p}\n")
            f.write("\n")
    python_f1 = conlleval_f1(tagged)

    # The same data through a CRF++ template (CoNLL-2000's chunking template: words and tags
    # around the token, no shapes or suffixes), the same trainer and settings.
    model = os.path.join(tmp, "template.model")
    template = os.path.join(here, "..", "tests", "data", "chunking.template")
    start = time.monotonic()
    subprocess.run([binary, "train", os.path.join(data_dir, "esp.train"), "-t", template, "-a", "lbfgs",
                    "--c1", "0.1", "--c2", "0.1", "--max-iterations", "100", "--possible-transitions", "-q",
                    "-m", model], check=True)
    cli_seconds = time.monotonic() - start
    cli_tagged = os.path.join(tmp, "template.tagged")
    subprocess.run([binary, "tag", os.path.join(data_dir, "esp.testb"), "-m", model, "-q", "-o", cli_tagged],
                   check=True)
    template_f1 = conlleval_f1(cli_tagged)
    with open(cli_tagged, encoding="utf-8") as f:
        blocks = [b for b in f.read().split("\n\n") if b.strip()]
    template_pred = [[line.split()[-1] for line in b.splitlines()] for b in blocks]

print(f"data: {len(train)} training sentences, {len(test)} test sentences (esp.train, esp.testb)")
print(f"python features (crfx.CRF):   weighted label F1 {weighted_f1(y_test, y_pred, labels):.4f}, "
      f"conlleval F1 {python_f1:.2f}, training {seconds:.1f} s ({crf.training_log_['iterations']} iterations)")
print(f"chunking template (crfx train): weighted label F1 {weighted_f1(y_test, template_pred, labels):.4f}, "
      f"conlleval F1 {template_f1:.2f}, training {cli_seconds:.1f} s (process, reading included)")
