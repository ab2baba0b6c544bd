#!/usr/bin/env bash
# Given seed, data and layout a run is bit-reproducible: two identical runs log
# identical losses, gradient norms and routing, and write identical weights.
source "$(dirname "$0")/common.bash" "$@"

prepare_data 512
write_config a.toml 12
sed "s|$WORK/run|$WORK/run2|" "$WORK/a.toml" >"$WORK/b.toml"
"$ZAYA" train --config "$WORK/a.toml" --quiet >/dev/null
"$ZAYA" train --config "$WORK/b.toml" --quiet >/dev/null
strip() { sed -E 's/"(step_seconds|tokens_per_second|mfu|elapsed|eta)":[0-9.e+-]+,?//g' "$1"; }
diff <(strip "$WORK/run/metrics.jsonl") <(strip "$WORK/run2/metrics.jsonl") || fail "metrics differ between identical runs"
cmp "$WORK/run/final/model.safetensors" "$WORK/run2/final/model.safetensors" || fail "weights differ"
echo "determinism: OK"
