#!/usr/bin/env bash
# OpenAI's GPT-2 weights (Hugging Face's model.safetensors) -> our model files, with
# dev/data/gpt2_from_safetensors.py. No network here, so no real OpenAI file: every file is a
# synthetic one in the same layout (dev/test/openai_weights_fixture.py: HF's tensor names,
# Conv1D weights stored (in, out), the attention buffers, a padded JSON header), L 2, C 64,
# NH 4, V 50257, maxT 32.
#  - the converted file's logits, from train_gpt2.c's own forward (dev/test/openai_logits.c),
#    match a float64 forward in Hugging Face's layout on the source tensors, per logit;
#    train_gpt2.py's GPT loaded from the converted file matches too; a negative control
#    (a square Conv1D weight stored the wrong way round, which no shape check can see) fails it;
#  - the file: header, every value bit for bit, zero padded wte rows, the bf16 file's rounding;
#  - the config of all four sizes (124M..1558M) from shapes alone;
#  - F16 and BF16 sources converted (widened exactly), the "transformer." prefix, no buffers,
#    a tied lm_head, a directory with config.json, a Hugging Face cache folder;
#  - bad input: one error line naming the file, exit 1, no output file left: not safetensors,
#    truncated, data_offsets that overlap, leave a hole or stop before the file's end, missing or
#    misshapen tensor, unsupported dtype, unknown tensor, untied head, NaN;
#  - train_gpt2 fine-tunes the converted file.
# usage: dev/test/test_openai_weights.sh   (from anywhere; needs /usr/bin/python3 with numpy + torch)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
PY=/usr/bin/python3
CONV="$PY dev/data/gpt2_from_safetensors.py"
FIX="$PY dev/test/openai_weights_fixture.py"
export NH=4 # the synthetic model's heads, for the fixture's checks
# one batch, B 2 x T 8, with the first and last token ids
TOKENS=(2 8 0 50256 464 3290 318 257 1332 13 15496 11 995 0 50256 1 2 3)
checks() { # checks COMMAND...: the fixture's "ok"/"FAIL" lines into our counters
    local line out
    out=$("$@" 2>&1)
    while IFS= read -r line; do
        case "$line" in "ok   "*) ok "${line#ok   }" ;; "FAIL "*) bad "${line#FAIL }" ;; *) echo "     $line" ;; esac
    done <<< "$out"
    grep -qE '^(ok|FAIL) ' <<< "$out" || bad "no result from: $*"
}

# the C driver: train_gpt2.c's loader and forward
if ${CC:-gcc} -O2 -fopenmp -Wall -Wextra -Werror -I. dev/test/openai_logits.c -o "$tmp/openai_logits" -lm 2> "$tmp/cc.txt"; then
    ok "dev/test/openai_logits.c builds warning-free"
else bad "dev/test/openai_logits.c does not build"; cat "$tmp/cc.txt"; fi
logits_check() { # logits_check SRC CONVERTED: C forward on CONVERTED vs the reference on SRC
    local name=$1 src=$2 conv=$3 out
    if out=$("$tmp/openai_logits" "$conv" "$tmp/logits.f32" "${TOKENS[@]}" 2>&1); then
        if grep -q "padded logits max |x| 0$" <<< "$out"; then ok "$name: the padded logits V..Vp-1 are exactly 0"
        else bad "$name: padded logits not 0: $out"; fi
        checks $FIX logits "$src" "$tmp/logits.f32" "${TOKENS[@]}"
    else bad "$name: openai_logits failed: $out"; fi
}

# (a)-(c) F32, HF's layout: convert, compare the file and the logits
$FIX write "$tmp/m.safetensors"
if $CONV --in "$tmp/m.safetensors" --out "$tmp/c.bin" --bf16-out "$tmp/c_bf16.bin" --heads 4 > "$tmp/conv.txt" 2>&1; then
    ok "F32 source converted: $(tail -n 2 "$tmp/conv.txt" | head -n 1)"
else bad "F32 source: conversion failed"; cat "$tmp/conv.txt"; fi
checks $FIX file "$tmp/m.safetensors" "$tmp/c.bin" "$tmp/c_bf16.bin"
logits_check "F32" "$tmp/m.safetensors" "$tmp/c.bin"
checks $FIX torchref "$tmp/m.safetensors" "$tmp/c.bin" "${TOKENS[@]}"

# the converter needs no torch: the same conversion with torch made unimportable
rm -f "$tmp/nt.bin"
if $PY -c 'import sys, runpy; sys.modules["torch"] = None; sys.argv[0] = "gpt2_from_safetensors.py"; runpy.run_path("dev/data/gpt2_from_safetensors.py", run_name="__main__")' \
       --in "$tmp/m.safetensors" --out "$tmp/nt.bin" --heads 4 > "$tmp/nt.txt" 2>&1 && cmp -s "$tmp/c.bin" "$tmp/nt.bin"; then
    ok "the converter runs with torch unimportable (numpy + standard library only), same file"
else bad "the converter without torch"; cat "$tmp/nt.txt"; fi

# the negative control: attn.c_proj.weight of layer 0 stored (out, in). Square, so its shape
# cannot tell; the conversion goes through and the logits comparison must catch it.
$FIX write "$tmp/neg.safetensors" --transpose h.0.attn.c_proj.weight
$CONV --in "$tmp/neg.safetensors" --out "$tmp/neg.bin" --heads 4 > /dev/null 2>&1
"$tmp/openai_logits" "$tmp/neg.bin" "$tmp/neg.f32" "${TOKENS[@]}" > /dev/null 2>&1
if ! $FIX logits "$tmp/m.safetensors" "$tmp/neg.f32" "${TOKENS[@]}" > "$tmp/neg.txt" 2>&1 && grep -q "^FAIL " "$tmp/neg.txt"; then
    ok "negative control: one square Conv1D weight the wrong way round fails the logits check ($(grep -o 'worst [^,]*' "$tmp/neg.txt"))"
else bad "negative control: a transposed c_proj passed the logits check"; cat "$tmp/neg.txt"; fi

# (d) the four sizes' configs from shapes alone
checks $FIX configs

# variants that must give the same file as the plain F32 source
same_as_plain() { # same_as_plain WHAT CONVERTER-ARGS...
    local what=$1; shift
    rm -f "$tmp/v.bin"
    if $CONV "$@" --out "$tmp/v.bin" > "$tmp/v.txt" 2>&1 && cmp -s "$tmp/c.bin" "$tmp/v.bin"; then
        ok "$what: converted, byte-identical to the plain file"
    else bad "$what"; cat "$tmp/v.txt"; fi
}
$FIX write "$tmp/prefix.safetensors" --prefix transformer. --lm-head same
same_as_plain "'transformer.' prefix and an lm_head.weight equal to wte" --in "$tmp/prefix.safetensors" --heads 4
$FIX write "$tmp/nobuf.safetensors" --no-buffers
same_as_plain "no attn.bias/masked_bias buffers (newer exports)" --in "$tmp/nobuf.safetensors" --heads 4
mkdir -p "$tmp/dir"
cp "$tmp/m.safetensors" "$tmp/dir/model.safetensors"
echo '{"model_type": "gpt2", "n_head": 4, "n_layer": 2, "n_embd": 64, "n_positions": 32, "vocab_size": 50257}' > "$tmp/dir/config.json"
same_as_plain "a directory: its model.safetensors, NH from its config.json" --in "$tmp/dir"
hub=$tmp/hub/models--gpt2
mkdir -p "$hub/snapshots/0123abcd" "$hub/snapshots/ffff0000" "$hub/refs" "$hub/blobs"
cp "$tmp/m.safetensors" "$hub/blobs/aaaa"
ln -s ../../blobs/aaaa "$hub/snapshots/0123abcd/model.safetensors"
cp "$tmp/nobuf.safetensors" "$hub/snapshots/ffff0000/model.safetensors" # an older snapshot
cp "$tmp/dir/config.json" "$hub/snapshots/0123abcd/config.json"
echo 0123abcd > "$hub/refs/main"
same_as_plain "a Hugging Face cache folder: the snapshot refs/main names (a symlink to a blob)" --in "$hub"
same_as_plain "a Hugging Face snapshot folder" --in "$hub/snapshots/0123abcd"

# (e) F16 and BF16 sources: accepted, widened exactly; their own logits check
for dt in BF16 F16; do
    $FIX write "$tmp/$dt.safetensors" --dtype $dt
    if $CONV --in "$tmp/$dt.safetensors" --out "$tmp/$dt.bin" --heads 4 > "$tmp/$dt.txt" 2>&1; then
        ok "$dt source accepted: $(grep -o 'dtypes.*' "$tmp/$dt.txt")"
        checks $FIX file "$tmp/$dt.safetensors" "$tmp/$dt.bin"
        logits_check "$dt" "$tmp/$dt.safetensors" "$tmp/$dt.bin"
    else bad "$dt source refused"; cat "$tmp/$dt.txt"; fi
done

# (e) bad input: exit 1, one line on stderr "error: FILE: ...", the expected words, no output
# file left behind (also when the error comes halfway through writing: the NaN case)
refused() { # refused WHAT FILE-NAMED EXPECTED-TEXT CONVERTER-ARGS...
    local what=$1 named=$2 want=$3; shift 3
    rm -f "$tmp/out.bin" "$tmp"/out.bin.tmp*
    $CONV "$@" --out "$tmp/out.bin" --bf16-out "$tmp/out_bf16.bin" > /dev/null 2> "$tmp/err.txt"
    local rc=$? lines msg
    lines=$(wc -l < "$tmp/err.txt"); msg=$(head -n 1 "$tmp/err.txt")
    if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && [[ "$msg" == "error: $named"* ]] && grep -qF -- "$want" "$tmp/err.txt" &&
       ! ls "$tmp"/out.bin* "$tmp"/out_bf16.bin* > /dev/null 2>&1; then
        ok "$what: $msg"
    else bad "$what (exit $rc, $lines lines, output left: $(ls "$tmp"/out* 2>/dev/null | wc -l))"; cat "$tmp/err.txt"; fi
}
s=$tmp/m.safetensors
head -c $(( $(stat -c %s "$s") - 1000 )) "$s" > "$tmp/trunc.safetensors"
refused "truncated file" "$tmp/trunc.safetensors" "truncated" --in "$tmp/trunc.safetensors" --heads 4
# data_offsets must tile the data region: an overlap (ln_1's bias reading its weight's bytes) would
# otherwise convert into a model whose bias equals its weight; a hole; bytes after the last tensor
$FIX write "$tmp/overlap.safetensors" --alias h.0.ln_1.bias=h.0.ln_1.weight
refused "overlapping data_offsets" "$tmp/overlap.safetensors" "tensors 'h.0.ln_1.bias' and 'h.0.ln_1.weight' overlap" --in "$tmp/overlap.safetensors" --heads 4
$FIX write "$tmp/gap.safetensors" --gap 64
refused "a hole between two tensors" "$tmp/gap.safetensors" "of the data belong to no tensor (between 'h.0.attn.c_attn.bias' and " --in "$tmp/gap.safetensors" --heads 4
$FIX write "$tmp/trail.safetensors" --trailing 16
refused "bytes after the last tensor" "$tmp/trail.safetensors" "belong to no tensor (after the last tensor 'h.1.attn.masked_bias')" --in "$tmp/trail.safetensors" --heads 4
head -c 5 "$s" > "$tmp/tiny.safetensors"
refused "5-byte file" "$tmp/tiny.safetensors" "not a safetensors file" --in "$tmp/tiny.safetensors"
refused "an llm.c model file (wrong magic)" "$MODEL" "not a safetensors file" --in "$MODEL"
printf 'PK\003\004 this is a zip archive, not a safetensors file................' > "$tmp/zip.bin"
refused "a zip (PyTorch's pytorch_model.bin)" "$tmp/zip.bin" "PyTorch" --in "$tmp/zip.bin"
$PY -c 'import sys; open(sys.argv[1], "wb").write((24).to_bytes(8, "little") + b"[1, 2, 3] not an object..")' "$tmp/json.safetensors"
refused "header is not a JSON object" "$tmp/json.safetensors" "not a safetensors file" --in "$tmp/json.safetensors"
$FIX write "$tmp/drop.safetensors" --drop h.1.mlp.c_fc.bias
refused "missing tensor" "$tmp/drop.safetensors" "missing tensor 'h.1.mlp.c_fc.bias'" --in "$tmp/drop.safetensors" --heads 4
$FIX write "$tmp/drop2.safetensors" --drop wpe.weight
refused "missing wpe" "$tmp/drop2.safetensors" "missing tensor 'wpe.weight'" --in "$tmp/drop2.safetensors" --heads 4
$FIX write "$tmp/tr.safetensors" --transpose h.0.attn.c_attn.weight
refused "Conv1D weight stored (out, in)" "$tmp/tr.safetensors" "'h.0.attn.c_attn.weight' has shape [192, 64], expected [64, 192]" --in "$tmp/tr.safetensors" --heads 4
mkdir -p "$tmp/badcfg"
cp "$s" "$tmp/badcfg/model.safetensors"
echo '{"n_head": 4, "n_layer": 3}' > "$tmp/badcfg/config.json"
refused "config.json disagrees with the shapes" "$tmp/badcfg/model.safetensors" "config.json says n_layer 3, the tensors say 2" --in "$tmp/badcfg"
$FIX write "$tmp/f64.safetensors" --dtype F64
refused "F64 source" "$tmp/f64.safetensors" "dtype F64: supported are F32, F16 and BF16" --in "$tmp/f64.safetensors" --heads 4
$FIX write "$tmp/extra.safetensors" --extra h.0.attn.rotary.weight
refused "unknown tensor" "$tmp/extra.safetensors" "unexpected tensor 'h.0.attn.rotary.weight'" --in "$tmp/extra.safetensors" --heads 4
$FIX write "$tmp/head.safetensors" --lm-head diff
refused "lm_head.weight different from wte" "$tmp/head.safetensors" "untied head" --in "$tmp/head.safetensors" --heads 4
$FIX write "$tmp/nan.safetensors" --nan h.1.mlp.c_proj.weight
refused "a NaN" "$tmp/nan.safetensors" "'h.1.mlp.c_proj.weight' holds non-finite values" --in "$tmp/nan.safetensors" --heads 4
refused "C 64 without --heads or config.json" "$s" "--heads" --in "$s"
refused "no such file" "$tmp/nope.safetensors" "no such file" --in "$tmp/nope.safetensors"
mkdir -p "$tmp/empty"
refused "directory without model.safetensors" "$tmp/empty" "no model.safetensors" --in "$tmp/empty"
out=$($CONV --download 124M 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(wc -l <<< "$out")" -eq 1 ] && grep -qF "https://huggingface.co/openai-community/gpt2/resolve/main/model.safetensors" <<< "$out"; then
    ok "--download 124M: exit $rc, one line with the URL to fetch"
else bad "--download 124M"; echo "$out"; fi

# our trainers take the converted file: train_gpt2 fine-tunes it for 3 steps
if OMP_NUM_THREADS=2 ./train_gpt2 -e "$tmp/c.bin" "${DATA[@]}" -b 2 -t 32 -x 3 -v 3 -m 2 -s 0 -o "$tmp/ft" > "$tmp/ft.txt" 2>&1 &&
   [ "$(grep -c 'train loss' "$tmp/ft.txt")" -eq 3 ] && grep -q 'val loss' "$tmp/ft.txt" && [ -f "$tmp/ft/model_00000003.bin" ]; then
    ok "train_gpt2 fine-tunes the converted file: $(grep -o 'train loss [0-9.]*' "$tmp/ft.txt" | tr '\n' ' ')"
else bad "train_gpt2 on the converted file"; tail -n 5 "$tmp/ft.txt"; fi

# the CUDA trainer takes the bf16 file: on the CPU emulator (dev/cuda/emu) when it is built
if [ -x ./train_gpt2cu_emu ]; then
    if EMU_THREADS=2 ./train_gpt2cu_emu -e "$tmp/c_bf16.bin" "${DATA[@]}" -b 2 -t 32 -x 2 -v 0 -s 0 > "$tmp/cu.txt" 2>&1 &&
       [ "$(grep -c 'train loss' "$tmp/cu.txt")" -eq 2 ]; then
        ok "train_gpt2cu (emulated) trains from the converted bf16 file: $(grep -o 'train loss [0-9.]*' "$tmp/cu.txt" | tr '\n' ' ')"
    else bad "train_gpt2cu_emu on the converted bf16 file"; tail -n 5 "$tmp/cu.txt"; fi
else echo "     (train_gpt2cu_emu not built: the bf16 file is checked bit for bit only)"; fi

summary "openai_weights"
