"""Hugging Face `datasets` reads an unpacked pack as a dataset folder: `load_dataset(PACK_DIR)`, which
takes the splits from the YAML header of the pack's README.md (its dataset card).

    python datasets_load.py OUT_JSON PACK_DIR...

Writes, per pack folder, each split's rows (task ids) and columns, or the error `datasets` raised.
"""

import json
import sys
from pathlib import Path

from datasets import load_dataset

out, packs = Path(sys.argv[1]), sys.argv[2:]
seen = {}
for pack in packs:
    try:
        loaded = load_dataset(pack)
    except Exception as exc:  # noqa: BLE001 - the test reads what went wrong
        seen[pack] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    seen[pack] = {
        name: {"task_ids": [row["ground_truth"] for row in split["reward_model"]], "columns": split.column_names}
        for name, split in loaded.items()
    }
out.write_text(json.dumps(seen))
