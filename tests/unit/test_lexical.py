import json
import random
import string

import pytest

from ragscale.metrics.lexical import extractiveness, length_words, normalize_text, recall, rouge_l, rouge_tokenize

rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")


def _real_pairs(path: str, limit: int = 1500) -> list[tuple[str, str]]:
    pairs = []
    with open(path) as fh:
        for line in fh:
            rec = json.loads(line)
            target = rec["targets"][0]["text"]
            texts = [c["text"] for c in rec.get("contexts") or []]
            for t in texts:
                pairs.append((t, target))  # a passage as the "prediction"
                pairs.append((target, t))
            turns = [t["text"] for t in rec["input"]]
            pairs.append((turns[-1], target))
            if len(pairs) >= limit:
                break
    return pairs


def _random_pairs(n: int, seed: int = 7) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    vocab = ["the", "a", "Cat", "cats", "dog's", "run", "ran", "1,250", "0.305%", "$604", "naïve", "über",
             "e-mail", "U.S.", "x", "42", "-0.133%", "don't", "\n", "—", "ÅB", "日本", "ok!", "", "  "]
    pairs = []
    for _ in range(n):
        a = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 40)))
        b = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.1:
            a = "".join(rng.choice(string.printable) for _ in range(rng.randint(0, 80)))
        pairs.append((a, b))
    return pairs


def test_rouge_l_equals_rouge_score_on_real_and_random_pairs(mtragun):
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    pairs = _real_pairs(mtragun) + _random_pairs(3000)
    assert len(pairs) > 4000
    worst = 0.0
    for pred, target in pairs:
        ref = scorer.score(target, pred)["rougeL"].fmeasure
        worst = max(worst, abs(rouge_l(pred, target) - ref))
    assert worst <= 1e-12


def test_rouge_tokenize_matches_rouge_score_tokenizer():
    from rouge_score import tokenize

    for a, b in _random_pairs(500, seed=3):
        assert rouge_tokenize(a) == tokenize.tokenize(a, None)


def test_rouge_l_hand_computed():
    # LCS("a b c d", "a c d e") = 3 -> P = 3/4, R = 3/4, F = 0.75
    assert rouge_l("a c d e", "a b c d") == pytest.approx(0.75)
    assert rouge_l("", "a b") == 0.0
    assert rouge_l("!!!", "a b") == 0.0


def test_recall_follows_mtrag_normalisation():
    assert normalize_text("The Cat, sat!  on a mat.") == "cat sat on mat"
    # target tokens (normalised): cat sat on mat -> prediction covers cat, mat -> 2/4
    assert recall("A mat; a CAT.", "The cat sat on a mat") == pytest.approx(0.5)
    assert recall("nothing shared", "the cat") == 0
    # multiset overlap: 'cat' twice in target, once in prediction -> 1/2
    assert recall("cat", "cat cat") == pytest.approx(0.5)


def test_extractiveness_substring_shortcut_and_rouge():
    passage = "Solar panels convert sunlight into electricity."
    # the whole (cleaned, space-free) passage inside the response -> 1
    assert extractiveness("As noted: solar panels convert sunlight into electricity, cheaply.", passage) == 1.0
    # otherwise ROUGE-L of the cleaned texts, passage as the reference
    got = extractiveness("Panels convert light.", passage)
    assert got == pytest.approx(rouge_l("panels convert light", "solar panels convert sunlight into electricity"))
    assert 0 < got < 1


def test_extractiveness_equals_reference_cleaning_with_beautifulsoup(mtragun):
    bs4 = pytest.importorskip("bs4")
    pytest.importorskip("lxml")
    import html
    import re

    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def clean(text):  # MT-RAG: clean_html(strip_newline_words(text))
        text = re.sub(r"[^\w\s]", "", text.replace("\n", " ")).lower()
        return bs4.BeautifulSoup(html.unescape(text), features="lxml").get_text()

    def reference(pred, passage):
        a, b = clean(pred), clean(passage)
        if b.replace(" ", "") in a.replace(" ", ""):
            return 1
        return scorer.score(b, a)["rougeL"].fmeasure

    pairs = _real_pairs(mtragun, limit=600) + [("<b>bold</b> &amp; more", "bold more"), ("x", "x")]
    for pred, passage in pairs:
        assert extractiveness(pred, passage) == pytest.approx(reference(pred, passage), abs=1e-12)


def test_length_counts_words_not_characters():
    assert length_words("Three short  words") == 3
    assert length_words("  ") == 0
