#!/usr/bin/env bash
# dev/data/fineweb.js on a small local fixture in FineWeb's file format (3 parquet files, 300
# documents with a `text` column, snappy / gzip / uncompressed, several row groups each), with a
# tiny --shard-size. No network: only --local is exercised.
#  - the shards decode back to exactly the documents, each after one <|endoftext|>, in order;
#    headers and sizes right (val first, every shard but the last full); --edu names;
#  - the same bytes with 1 and 3 tokenizer workers;
#  - resume: killed (SIGKILL, mid-shard, a partial .tmp left) after K shards, once or twice, or
#    a shard deleted afterwards: the rerun gives byte-identical files, skipping finished sources;
#  - bad input: a non-parquet .parquet file, no `text` column, an empty dir, other settings on
#    an existing output: one line naming the file, non-zero exit;
#  - train_gpt2 trains and evaluates on the shards.
# usage: dev/test/test_fineweb.sh   (from anywhere; needs npm ci's node_modules, train_gpt2, gpt2_tiny.bin)
set -u
cd "$(dirname "$0")/../.."
source dev/test/lib.sh
NODE=${NODE:-node}
S=2000   # tokens per shard: 18 shards from the fixture's ~35k tokens
prep() { nice -n 10 "$NODE" dev/data/fineweb.js --local "$tmp/src" --shard-size $S "$@"; }
same() { # same DIR_A DIR_B: the same shard files, byte for byte
    [ "$(cd "$1" && ls *.bin)" = "$(cd "$2" && ls *.bin)" ] || return 1
    for f in "$1"/*.bin; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
}

if ! nice -n 10 "$NODE" dev/test/fineweb_fixture.mjs write "$tmp/src" > "$tmp/fixture.txt" 2>&1; then
    bad "fixture: could not write the parquet files (npm ci?)"; cat "$tmp/fixture.txt"; summary fineweb; exit 1
fi

# 1-2: decode, headers, sizes
start=$SECONDS
if prep --out "$tmp/ref" --workers 2 > "$tmp/ref.txt" 2>&1; then ok "prep of 3 files ran ($((SECONDS - start)) s)"
else bad "prep failed"; tail -5 "$tmp/ref.txt"; fi
if out=$(nice -n 10 "$NODE" dev/test/fineweb_fixture.mjs check "$tmp/ref" fineweb "$tmp/docs.json" $S); then
    ok "shards decode to the 300 documents, each after <|endoftext|>, val first, all but the last full ($out)"
else bad "decode/headers: $out"; fi
[ -f "$tmp/ref/fineweb_val_000000.bin" ] && [ -f "$tmp/ref/fineweb_train_000001.bin" ] && ! ls "$tmp/ref"/*.tmp > /dev/null 2>&1 \
    && ok "llm.c names (fineweb_val_000000.bin, fineweb_train_000001.bin ...), no .tmp left" || bad "shard names or leftover .tmp"
prep --out "$tmp/edu" --edu > /dev/null 2>&1
if out=$(nice -n 10 "$NODE" dev/test/fineweb_fixture.mjs check "$tmp/edu" edu_fineweb "$tmp/docs.json" $S) \
    && cmp -s "$tmp/edu/edu_fineweb_train_000003.bin" "$tmp/ref/fineweb_train_000003.bin"; then
    ok "--edu: edu_fineweb_* names, same tokens"
else bad "--edu: $out"; fi

prep --out "$tmp/w1" --workers 1 > /dev/null 2>&1
prep --out "$tmp/w3" --workers 3 > /dev/null 2>&1
if same "$tmp/ref" "$tmp/w1" && same "$tmp/ref" "$tmp/w3"; then ok "1, 2 and 3 workers write the same bytes"
else bad "the worker count changes the output"; fi

if prep --out "$tmp/ref" > "$tmp/again.txt" 2>&1 && grep -q "nothing to do" "$tmp/again.txt" && same "$tmp/ref" "$tmp/w1"; then
    ok "a rerun on a complete output does nothing"
else bad "rerun on a complete output"; cat "$tmp/again.txt"; fi

# 3: resume after a kill. The hook SIGKILLs the run halfway through writing shard K's .tmp.
for K in 1 6 9 12; do   # 9: resumes inside a document that spans 5 shards
    d="$tmp/k$K"
    prep --out "$d" --workers 2 --stop-after-shards $K > "$d.1.txt" 2>&1 & wait $!; rc=$?
    n=$(ls "$d"/fineweb_*.bin 2>/dev/null | wc -l)
    if [ $rc -ne 137 ] || [ "$n" -ne $K ] || ! ls "$d"/*.bin.tmp > /dev/null 2>&1; then
        bad "kill after $K shards: exit $rc, $n shards (want 137, $K, and a partial .tmp)"; continue
    fi
    prep --out "$d" --workers 3 > "$d.2.txt" 2>&1
    if same "$tmp/ref" "$d" && grep -q "resuming at shard $K" "$d.2.txt"; then
        ok "killed mid-shard after $K shards, rerun (other worker count): byte-identical to the uninterrupted run"
    else bad "resume after $K shards differs"; tail -3 "$d.2.txt"; fi
done
# the resumed run skipped the source files before its starting point
if ! grep -q "000_00000.parquet" "$tmp/k12.2.txt" && grep -q "002_00000.parquet (3/3)" "$tmp/k12.2.txt"; then
    ok "resume at shard 12 skips the source files already done (starts in 002_00000.parquet at a row)"
else bad "resume at shard 12 read finished sources"; cat "$tmp/k12.2.txt"; fi
# killed twice, then finished
d="$tmp/twice"
prep --out "$d" --stop-after-shards 3 > /dev/null 2>&1 & wait $!
prep --out "$d" --stop-after-shards 5 > /dev/null 2>&1 & wait $!
prep --out "$d" > /dev/null 2>&1
same "$tmp/ref" "$d" && ok "killed twice (3, then 5 more shards), finished: byte-identical" || bad "killed twice: differs"
# a shard lost or truncated after the run: regenerated
rm "$d/fineweb_train_000009.bin"; truncate -s 3000 "$d/fineweb_train_000014.bin"
prep --out "$d" > "$d.txt" 2>&1
same "$tmp/ref" "$d" && grep -q "resuming at shard 9" "$d.txt" && ok "a deleted shard (and a truncated later one) are rewritten identically" \
    || { bad "deleted shard not rewritten"; cat "$d.txt"; }
last=$(ls "$d"/fineweb_train_*.bin | tail -n 1); truncate -s -2 "$last"
prep --out "$d" > "$d.txt" 2>&1
same "$tmp/ref" "$d" && grep -q "resuming at shard 17" "$d.txt" && ok "a truncated last shard is rewritten identically" \
    || { bad "truncated last shard not rewritten"; cat "$d.txt"; }

# 4: bad input: one line naming the file, non-zero exit
bad_input() { # bad_input WHAT DIR NEEDLE [extra flags]
    local what=$1 dir=$2 needle=$3; shift 3
    nice -n 10 "$NODE" dev/data/fineweb.js --local "$dir" --out "$tmp/bad_out" --shard-size $S "$@" > "$tmp/bad.txt" 2>&1; local rc=$?
    if [ $rc -ne 0 ] && [ "$(wc -l < "$tmp/bad.txt")" -eq 1 ] && grep -qF "$needle" "$tmp/bad.txt"; then
        ok "$what: exit $rc, one line: $(cat "$tmp/bad.txt")"
    else bad "$what: exit $rc"; cat "$tmp/bad.txt"; fi
}
mkdir -p "$tmp/b1" "$tmp/b2" "$tmp/b3"
cp "$tmp/src"/*.parquet "$tmp/b1/"; head -c 5000 /dev/urandom > "$tmp/b1/001_00001.parquet"
bad_input "a non-parquet .parquet file" "$tmp/b1" "$tmp/b1/001_00001.parquet"
cp "$tmp/src/000_00000.parquet" "$tmp/b2/"; printf 'not parquet at all\n' > "$tmp/b2/zz.parquet"
bad_input "a text file named .parquet" "$tmp/b2" "$tmp/b2/zz.parquet"
nice -n 10 "$NODE" dev/test/fineweb_fixture.mjs notext "$tmp/b3/000_00000.parquet" > /dev/null 2>&1
bad_input "a parquet file without a text column" "$tmp/b3" "$tmp/b3/000_00000.parquet: no 'text' column"
mkdir -p "$tmp/empty"; touch "$tmp/empty/README.md"
bad_input "a dir without parquet files" "$tmp/empty" "$tmp/empty: no .parquet files"
bad_input "a missing dir" "$tmp/nope" "$tmp/nope"
cp -r "$tmp/ref" "$tmp/bad_out"
bad_input "an output dir written with another --shard-size" "$tmp/src" "fineweb_state.json" --shard-size 3000
rm -rf "$tmp/bad_out"

# download path, against a local mock of the Hugging Face URLs (never the network): the listing,
# per-file download with a connection dropped midway (resumed with a Range request), a kill
d="$tmp/dl"
nice -n 10 "$NODE" dev/test/fineweb_fixture.mjs serve "$tmp/src" "$tmp/port" > "$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
export FINEWEB_HF_URL="http://127.0.0.1:$(cat "$tmp/port" 2>/dev/null)"
{ nice -n 10 "$NODE" dev/data/fineweb.js --out "$d" --shard-size $S --stop-after-shards 8 > "$d.1.txt" 2>&1 & wait $!; } 2>/dev/null
n1=$(wc -l < "$tmp/serve.log")
nice -n 10 "$NODE" dev/data/fineweb.js --out "$d" --shard-size $S > "$d.2.txt" 2>&1
unset FINEWEB_HF_URL
kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
if same "$tmp/ref" "$d" && grep -q "from byte" "$d.1.txt" && cmp -s "$tmp/src/001_00000.parquet" "$d/source/001_00000.parquet" \
    && ! tail -n +$((n1 + 1)) "$tmp/serve.log" | grep -qE '(000|001)_00000' && ! ls "$d/source"/*.part > /dev/null 2>&1; then
    ok "download (mock server): a dropped connection resumed by Range; killed, rerun fetches no finished file; same shards"
else bad "download from the mock server"; cat "$tmp/serve.log" "$d.1.txt" "$d.2.txt" | tail -20; fi

# 5: the trainer reads the shards (every shard holds more than B*T+1 = 65 tokens)
start=$SECONDS
if OMP_NUM_THREADS=2 ./train_gpt2 -e "$MODEL" -i "$tmp/ref/fineweb_train_*.bin" -j "$tmp/ref/fineweb_val_000000.bin" \
        -b 2 -t 32 -x 2 -v 1 -m 1 -s 0 > "$tmp/train.txt" 2>&1 && grep -q "val loss" "$tmp/train.txt"; then
    ok "train_gpt2 trains 2 steps and evaluates on the shards ($((SECONDS - start)) s)"
else bad "train_gpt2 on the shards"; tail -5 "$tmp/train.txt"; fi

summary fineweb
