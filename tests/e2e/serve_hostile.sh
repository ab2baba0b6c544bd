#!/usr/bin/env bash
# zaya serve against a hostile client (tests/e2e/serve_hostile.py): every finding
# of the December 2026 red-team replayed, with the classes around it, each
# answered with a 4xx sentence or the documented behaviour, the server serving a
# normal request after each. Loopback only; every loop bounded in count and time.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config train.toml 2
"$ZAYA" train --config "$WORK/train.toml" --quiet >/dev/null
# A LoRA adapter of it (two steps: only its files matter here), for the adapter cases.
sed '/^out_dir/d' "$WORK/train.toml" >"$WORK/lora.toml"
printf '[lora]\nrank = 4\nalpha = 8\n' >>"$WORK/lora.toml"
sed -i "/^\[model\]$/a init_from = \"$WORK/run/final\"" "$WORK/lora.toml"
"$ZAYA" train --config "$WORK/lora.toml" --set train.out_dir="$WORK/lora" --quiet >/dev/null
# Standard Python is enough: raw sockets, no client library between us and the server.
python3 "$SRC/tests/e2e/serve_hostile.py" "$ZAYA" "$WORK/run/final" "$WORK" "$WORK/lora/adapter"
