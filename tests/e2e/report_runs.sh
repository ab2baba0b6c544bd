#!/usr/bin/env bash
# zaya report over training runs and inference: two tiny runs of zaya train
# (a run directory and a metrics.jsonl path) and a bench infer JSON give curves
# named by run (loss with validation, learning rate, gradient norm), the
# routing heat maps per MoE layer over the steps, and the inference section.
source "$(dirname "$0")/common.bash" "$@"

expect_in() {  # expect_in FILE PATTERN: the file must match the extended regex
  grep -Eq -- "$2" "$1" || fail "$1 lacks /$2/: $(head -c 600 "$1")"
}

prepare_data 512
write_config train.toml 20
for run in lr_high lr_low; do
  lr=3e-3
  [[ $run == lr_low ]] && lr=1e-3
  "$ZAYA" train --config "$WORK/train.toml" --set train.out_dir="$WORK/runs/$run" --set optim.lr=$lr >"$WORK/$run.txt"
  expect_in "$WORK/runs/$run/metrics.jsonl" '"val_loss"'
done
"$ZAYA" bench infer --preset tiny --prefill 16,32 --batch 1,2 --context 16 --decode-steps 2 --warmup 1 \
  --json "$WORK/infer.json" >/dev/null

# A run directory and a metrics file stand for their runs.
"$ZAYA" report "$WORK/runs/lr_high" "$WORK/runs/lr_low/metrics.jsonl" "$WORK/infer.json" --out "$WORK/report" \
  --title "two runs" >"$WORK/report.txt"
cat "$WORK/report.txt"
expect_in "$WORK/report.txt" "section train +[0-9]+ figure"
expect_in "$WORK/report.txt" "section infer +[0-9]+ figure"
R=$WORK/report
for f in train_loss train_lr train_grad_norm infer_prefill infer_decode_infer; do
  [[ -s $R/$f.svg ]] || fail "report lacks $f.svg: $(ls "$R")"
done
for run in lr_high lr_low; do
  expect_in "$R/train_loss.svg" "data-name=\"$run\""
  expect_in "$R/train_loss.svg" "data-name=\"$run validation\""
  expect_in "$R/train_lr.svg" "data-name=\"$run\""
  expect_in "$R/train_grad_norm.svg" "data-name=\"$run\""
  for kind in imbalance skip entropy load; do
    [[ -s $R/train_routing_${run}_$kind.svg ]] || fail "report lacks train_routing_${run}_$kind.svg"
  done
  # Both MoE layers of num_blocks = 2 (half-layers 1 and 3) have a row, labelled by block as `zaya info` counts.
  expect_in "$R/train_routing_${run}_skip.svg" ">block 0<"
  expect_in "$R/train_routing_${run}_skip.svg" ">block 1<"
  # A share on a fixed 0-1 scale (red-team L18: all-zero skip rates got -1..1), cells without seams.
  expect_in "$R/train_routing_${run}_skip.svg" "class=\"ctick\"[^>]*>0(\.0+)?<"
  expect_in "$R/train_routing_${run}_skip.svg" "class=\"ctick\"[^>]*>1(\.0+)?<"
  expect_in "$R/train_routing_${run}_skip.svg" "shape-rendering=\"crispEdges\""
  expect_in "$R/train_routing_${run}_entropy.svg" "class=\"cell\""
done
H=$R/index.html
expect_in "$H" "<h2 id=\"train\">"
expect_in "$H" "<h2 id=\"infer\">Inference \(zaya bench infer\)</h2>"
expect_in "$H" "<td>lr_high</td>"
expect_in "$H" "<td>lr_low</td>"
expect_in "$H" "router entropy per layer"
expect_in "$H" "<th>prompt tokens</th>"
expect_in "$H" "<td>infer.json</td><td>2</td><td>16</td>"  # decode at batch 2, context 16
[[ $(grep -c "<svg" "$H") -ge 13 ]] || fail "index.html inlines fewer than 13 figures"
expect_in "$H" "<title>two runs</title>"
# Without --title the page is named by its content: a training report, not a cluster characterization.
"$ZAYA" report "$WORK/runs/lr_high" --out "$WORK/report1" >/dev/null
expect_in "$WORK/report1/index.html" "<title>zaya.cpp training report: lr_high</title>"
echo "report_runs: OK"
