"""The agreement figure (agreement.png): rendering only, its figures are agreement.json's rows
(ragscale.report.agreement_io writes both; left out of mutation testing, docs/testing.md)."""

from __future__ import annotations

from ragscale.report.agreement_io import ALL


def plot(result: dict, path: str) -> None:
    """Spearman's rho with its CI per model and overall, one panel per metric pair."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = list(dict.fromkeys((r["human"], r["metric"]) for r in result["rows"]))
    fig, axes = plt.subplots(len(pairs), 1, figsize=(7, 0.6 + 0.45 * max(2, len(result["rows"]))), squeeze=False)
    for ax, (h, m) in zip(axes[:, 0], pairs):
        rows = [r for r in result["rows"] if (r["human"], r["metric"]) == (h, m)]
        for y, r in enumerate(rows):
            e = r.get("spearman") or {}
            if e.get("value") is None:
                ax.text(0, y, "undefined", va="center", ha="center", fontsize=8, color="grey")
                continue
            lo, hi = e["ci"] or (e["value"], e["value"])
            ax.errorbar(e["value"], y, xerr=[[e["value"] - lo], [hi - e["value"]]], fmt="o",
                        color="black" if r["model"] == ALL else "tab:blue", capsize=3)
            ax.annotate(f"{e['value']:.2f}", (e["value"], y), textcoords="offset points", xytext=(0, 5),
                        ha="center", fontsize=7)
        ax.set_yticks(range(len(rows)), [f"{r['model']} (n={r['n']})" for r in rows])
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.axvline(0, color="grey", lw=0.8, ls=":")
        ax.set_xlim(-1.05, 1.05)
        ax.set_title(f"{h} (human) vs {m}: Spearman rho, 95% bootstrap CI", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
