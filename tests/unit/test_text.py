"""Text analysis for recall (RECALL-01): one function for index and query."""
from __future__ import annotations

import re

from morphz.shared.text.analyze import normalize, query_terms, terms
from morphz.shared.text.highlight import SCAN_CHARS, preview, preview_reach

CJK = re.compile(r"[\u4e00-\u9fff]")


def test_recall_01_nfkc_and_case_folding():
    assert normalize("ＳＡＮＤＢＯＸ Straße ﬁle") == "sandbox strasse file"
    assert terms("ＳＡＮＤＢＯＸ") == terms("sandbox") == ["sandbox"]
    assert terms("e\u0301t\u00e9") == terms("\u00e9t\u00e9")  # decomposed == composed


def test_recall_01_chinese_runs_are_never_one_token():
    words = terms("沙箱权限配置失败", bigrams=False)
    assert "沙箱权限配置失败" not in words and len(words) >= 4
    assert {"权限", "配置", "失败"} <= set(words)
    with_bigrams = terms("沙箱权限配置失败")
    assert "沙箱权限配置失败" not in with_bigrams
    assert {"沙箱", "箱权", "权限", "配置", "失败"} <= set(with_bigrams)


def test_recall_01_bigrams_bring_back_words_icu_cuts():
    for word in ("沙箱", "超时", "重试"):
        assert word not in terms(word, bigrams=False)  # ICU alone: single characters
        assert word in terms(word)


def test_recall_01_query_and_document_share_terms():
    doc = set(terms("部署到 cn-hangzhou 时沙箱权限配置失败"))
    for q in ("沙箱 权限", "cn-hangzhou", "hangzhou", "配置失败"):
        assert set(query_terms(q)) & doc, q


def test_recall_01_identifiers_stay_findable():
    t = terms("see @e42, v1.2.3 and cn-hangzhou (3.14 ms) user_id foo/bar")
    for expected in ("@e42", "e42", "v1.2.3", "cn-hangzhou", "cn", "hangzhou", "3.14",
                     "user_id", "foo/bar"):
        assert expected in t, expected


def test_recall_01_mixed_text_and_numbers():
    t = terms("Build 42 通过 passed 于 2026 年")
    assert {"build", "42", "通过", "passed", "2026"} <= set(t)


def test_recall_01_long_runs_cost_linear_time():
    # Regression: a backtracking identifier pattern made these cubic.
    assert len(terms("x" * 200000)) == 1
    assert len(terms("测试" * 20000)) > 20000


def test_recall_01_query_terms_are_distinct():
    q = query_terms("sandbox Sandbox SANDBOX 沙箱 沙箱")
    assert len(q) == len(set(q)) and "sandbox" in q and "沙箱" in q


def test_recall_01_preview_marks_matches():
    p = preview("昨天部署到 cn-hangzhou 区域时沙箱权限配置失败", set(query_terms("沙箱 权限")))
    assert "«沙箱权限»" in p
    long = "无关内容 " * 300 + "the sandbox failed"
    p = preview(long, set(query_terms("sandbox")))
    assert "«sandbox»" in p and p.startswith("…") and len(p) < 260
    assert preview("ＳＡＮＤＢＯＸ ok", {"sandbox"}) == "«ＳＡＮＤＢＯＸ» ok"


def test_recall_01_a_text_cut_at_preview_reach_previews_as_the_whole_text():
    """Search keeps only preview_reach() characters of a hit's text; the preview is the
    same as the whole text's wherever the match lies (or when none is in reach)."""
    filler = "lorem ipsum dolor "
    for at in (0, 100, SCAN_CHARS - 300, SCAN_CHARS - 30, SCAN_CHARS - 12, SCAN_CHARS - 7,
               SCAN_CHARS - 3, SCAN_CHARS + 5,
               3 * SCAN_CHARS):
        for width in (200, 40):
            text = (filler * (at // len(filler) + 1))[:at] + " Lantern 灯笼 lantern " + \
                filler * 2000
            cut = text[:preview_reach(width)]
            for query in ({"lantern"}, {"灯笼"}, {"lantern", "dolor"}, set()):
                assert preview(cut, query, width=width) == preview(text, query, width=width)
