"""BridgePure's claim on sample-wise LSP or OPS at 2-core CPU size: runs bench/bridgepure_claim.yaml
(~20 minutes on an idle 2-core machine) and prints the verdict, the steps curve and the chosen
strength from its report.

    python bench/bridgepure_claim.py lsp            # sample-wise LSP (APBench), L2 chosen on validation
    python bench/bridgepure_claim.py ops            # OPS, pixels per class chosen on validation
    python bench/bridgepure_claim.py --summary RUN_DIR   # print a finished run's summary again
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OVERRIDES = {
    "lsp": [],
    "ops": ["strength.method=ops", "strength.candidates=[{pixels: 1}, {pixels: 2}, {pixels: 4}]",
            "protected_all.method=ops", "report.protection=OPS (pixels per class chosen on validation)"],
}


def summary(run_dir: Path) -> str:
    report = json.loads((run_dir / "reports" / "report" / "report.json").read_text())
    v = report["verdict"]
    lines = [f"protection: {report['protection']}"]
    s = report.get("strength")
    if s:
        lines.append(f"strength chosen on validation: {s['chosen']['options']} (reached: {s['reached']}; "
                     f"validation clean {100 * s['clean_accuracy']:.1f}%; candidates "
                     + ", ".join(f"{c['options']} -> {100 * c['accuracy_mean']:.1f}%" for c in s["candidates"]) + ")")
    lines.append("| row | accuracy % | PSNR dB |")
    lines.append("|---|---|---|")
    for row in report["table"]:
        acc = row["accuracy"] or {}
        std = row["accuracy_std"]
        psnr = f"{row['psnr_mean']:.1f}" if row["psnr_mean"] is not None else "—"
        lines.append(f"| {row['name']} | {100 * row['accuracy_mean']:.1f} ± {100 * std:.1f} ({len(acc)} seeds) | {psnr} |")
    lines.append("steps curve: " + "; ".join(
        f"{c['name']} {c['steps']} steps churn {c['churn']} = {c['nfe']} calls: {100 * c['accuracy_mean']:.1f}% "
        f"{c['psnr_mean']:.1f} dB" for c in report["steps_curve"]))
    lines.append(f"validated (protected >= 25 below clean): {v['validated']} "
                 f"(drop {100 * v['protected_drop']:.1f} points)")
    if v["validated"]:
        lines.append(f"BridgePure within 5 of clean: {v['within_of_clean']} (gap {100 * v['gap_to_clean']:.1f})")
        lines.append(f"above every baseline: {v['above_every_baseline']} (best {v['best_baseline']} "
                     f"{100 * v['best_baseline_accuracy']:.1f})")
        lines.append(f"clearly above leaked-only: {v['clearly_above_leaked_only']} "
                     f"(+{100 * v['above_leaked_only_by']:.1f})")
        if "one_step" in v:
            lines.append(f"bridge - one-step (ablation): {100 * v['bridge_minus_one_step']:+.1f} points")
        lines.append(f"claim holds: {v['holds']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("protection", nargs="?", choices=sorted(OVERRIDES), default="lsp")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--summary", default=None, help="print the summary of a finished run directory")
    args = parser.parse_args()
    if args.summary:
        print(summary(Path(args.summary)))
        return
    from raypress.dag.runner import run_pipeline

    run_dir = Path(args.run_dir or f"runs/bridgepure-claim-{args.protection}-{time.strftime('%Y%m%d-%H%M%S')}")
    start = time.perf_counter()
    ledger = run_pipeline(str(HERE / "bridgepure_claim.yaml"), run_dir=str(run_dir), overrides=OVERRIDES[args.protection])
    print(f"run: {run_dir} ({time.perf_counter() - start:.0f} s, ledger adds up: {ledger['adds_up']})")
    print(summary(run_dir))


if __name__ == "__main__":
    main()
