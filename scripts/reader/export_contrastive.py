"""Writes the synthetic contrastive claim/evidence pairs of held-out squad-dev articles (the same pairs the
reader's training report scores) in the claim/evidence layout `attest-lab eval --verifier-data` reads:
`{"_id", "claim", "evidence", "label": true/false, "split": "heldout", "edit"}`. With `--heldin`, those of the
held-in articles instead (`"split": "train"`), which `attest-lab train support` fits the verifier's calibration on.

Usage: python scripts/reader/export_contrastive.py [--data data] [--seed 13] [--heldin] --out FILE
"""

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(__file__))
from data import answerability_rows, support_rows  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--heldin", action="store_true")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    rng = random.Random(args.seed)
    # The same draws as training: answerability first, then support.
    answerability_rows(f"{args.data}/squad-dev", rng)
    rows = support_rows(f"{args.data}/squad-dev", f"{args.data}/halueval-qa/items.jsonl",
                        f"{args.data}/vitaminc-train/items.jsonl", rng)
    n = 0
    with open(args.out + ".tmp", "w") as f:
        for split, claim, evidence, label, source in rows:
            if (split == "heldout") != args.heldin and source == "synthetic":
                f.write(json.dumps({"_id": f"syn{n:05d}", "claim": claim, "evidence": evidence,
                                    "label": bool(label), "split": "train" if args.heldin else "heldout"}) + "\n")
                n += 1
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {n} {'held-in' if args.heldin else 'held-out'} contrastive pairs to {args.out}")


if __name__ == "__main__":
    main()
