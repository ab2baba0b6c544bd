#!/usr/bin/env bash
# First contact with the program: verbs named with a suggestion, the verb
# list from a bare `zaya` and `zaya help`, defaults in --help, and one exit
# code (2, with an `error:` line) for everything wrong with the command line
# itself (docs/cli.md, "Exit codes").
source "$(dirname "$0")/common.bash" "$@"

# expect_ok PATTERN -- command...: exit 0 with PATTERN (an extended regex) on stdout.
expect_ok() {
  local pattern=$1; shift 2
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  [[ $rc == 0 ]] || fail "expected exit 0, got $rc from: $* ; output: $out"
  grep -Eq -- "$pattern" <<<"$out" || fail "output of '$*' lacks /$pattern/: $(head -c 600 <<<"$out")"
  echo "ok: $*"
}

# Verbs.
expect_error 2 "^error: unknown verb 'trian' \(did you mean 'train'\?\); verbs: .*train.*generate" -- "$ZAYA" trian
expect_error 2 "^error: unknown verb 'xyzzy'; verbs: info, data, train" -- "$ZAYA" xyzzy
expect_error 2 "^error: unknown subcommand 'gem' of zaya bench \(did you mean 'gemm'\?\)" -- "$ZAYA" bench gem
# expect_verbs command...: exit 0 and every verb listed, one a line.
expect_verbs() {
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  [[ $rc == 0 ]] || fail "expected exit 0, got $rc from: $* ; output: $out"
  for v in info data train rl generate score bench eval report ckpt launch size plan profile help; do
    grep -Eq "^  $v +[a-z]" <<<"$out" || fail "'$*' does not list the verb $v: $out"
  done
  echo "ok: $* lists the verbs"
}
expect_verbs "$ZAYA"
expect_verbs "$ZAYA" help
expect_ok "--config TEXT.*REQUIRED" -- "$ZAYA" help train
expect_ok "zaya bench gemm" -- "$ZAYA" help bench gemm
expect_error 2 "^error: unknown verb 'trian' \(did you mean 'train'\?\)" -- "$ZAYA" help trian

# Every option's default in --help.
expect_ok "--temperature FLOAT \[default: 0.8\]" -- "$ZAYA" generate --help
expect_ok "--max-new-tokens INT.*\[default: 128\]" -- "$ZAYA" generate --help
expect_ok "--vocab-size .*\[default: 4096\]" -- "$ZAYA" data tokenizer --help

# Flag values: exit 2 and an `error:` line, whether CLI11 or the library refuses them.
expect_error 2 "^error: --max-new-tokens -1 is invalid; allowed: 0..1048576" -- "$ZAYA" generate --model x --max-new-tokens -1
expect_error 2 "^error: --max-new-tokens abc is not an integer" -- "$ZAYA" generate --model x --max-new-tokens abc
expect_error 2 "^error: --max-new-tokens is missing its value \(--threads is a flag" -- \
  "$ZAYA" generate --model x --max-new-tokens --threads 1
expect_error 2 "^error: --temperature -1 is invalid; allowed: 0 \(greedy\) .. 100" -- "$ZAYA" generate --model x --temperature -1
expect_error 2 "^error: --dtype 'fp16' is invalid; allowed: auto, bf16, f32" -- "$ZAYA" generate --model x --dtype fp16
expect_error 2 "^error: unknown flag '--tempreature' for zaya generate \(did you mean '--temperature'\?\)" -- \
  "$ZAYA" generate --model x --tempreature 1

# --set mistakes are the command line's, not the config file's.
prepare_data 512
write_config good.toml 2
expect_error 2 "^error: --set train.stesp=3: unknown key 'train.stesp' \(did you mean 'train.steps'\?\)" -- \
  "$ZAYA" train --config "$WORK/good.toml" --set train.stesp=3
expect_error 2 "^error: --set trian.steps=3: unknown section 'trian' \(did you mean 'train'\?\)" -- \
  "$ZAYA" train --config "$WORK/good.toml" --set trian.steps=3
expect_error 2 "^error: --set train.micro_batch=0: train.micro_batch = 0 is invalid" -- \
  "$ZAYA" train --config "$WORK/good.toml" --set train.micro_batch=0

# zaya train --threads N is --set train.threads=N.
expect_error 2 "^error: --threads 5000 is invalid; allowed: 0..4096" -- "$ZAYA" train --config "$WORK/good.toml" --threads 5000
"$ZAYA" train --config "$WORK/good.toml" --threads 1 --quiet >"$WORK/train.log" || fail "train --threads 1 failed"
grep -q "^threads = 1$" "$WORK/run/config.toml" || fail "--threads 1 did not reach train.threads: $(cat "$WORK/run/config.toml")"
echo "ok: train --threads 1"
echo "cli usage: OK"
