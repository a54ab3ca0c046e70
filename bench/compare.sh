#!/bin/sh
# The benchmark comparisons: `hpt compare` on three workloads, each arm
# timed to the tuned baseline's final val loss on the training clock; the
# tuned-* workloads are the tuned protocol (below).
#
#   sh bench/compare.sh [WORKLOAD ...]     (default: all three, ~85 min on 2 cores)
#
#   shakespeare-cpu    nanoGPT's CPU shakespeare_char config (L4 H4 C128, B12
#                      T64, 2000 steps), LR sweep 1e-3..8e-3 (x2), 5 seeds, all arms
#   shakespeare-6x384  nanoGPT's 6x384 model at block 64, batch 12, reduced to
#                      400 steps; LR sweep 5e-4..4e-3 (x2), 3 seeds; baseline, hybrid, ema
#   fashion-cnn        the Fashion-MNIST CNN, 2 epochs (938 steps), evaluated
#                      every 94 steps; LR sweep 1e-3..8e-3 (x2), 5 seeds, all arms
#   tuned-*            the tuned protocol on those workloads (below)
#   issue26-*          the outer step's published settings under that protocol
#                      (below; the name is the workload's, kept for its results)
#   muon-*             Muon against the best tuned AdamW schedule (below)
#
# BENCH_TAG=T (e.g. the machine) keeps a re-measurement apart: runs go to
# runs/bench-compare-<workload>-T/ and results to bench/results/compare-<workload>-T/.
# Runs go to runs/bench-compare-<workload>/ (finished runs are reused when the
# script is run again: delete the directory to remeasure); results.json,
# results.md and the plots are copied to bench/results/compare-<workload>/.
# Benchmark on an idle machine: OpenMP spin-waits make a shared one 5-20x
# slower, and the comparisons are timings.
# JOBS=N trains N runs side by side (hpt compare --jobs), each on
# THREADS threads (default 2, or 1 when JOBS > 1): on the 2-core EPYC the
# models of these workloads train as fast per core on 1 thread as on 2, and
# two 1-thread runs side by side kept their clocks within 1% of a lone
# 1-thread run's, where lone 2-thread runs varied by up to 14%.
set -eu
# the call as given, for command.txt: the settings below that came from the
# environment, then the script (the workload is added per run)
called=$(for v in SEEDS BUDGETS SCHEDULES MUON_ARMS LRS JOBS THREADS BENCH_TAG; do
    eval "[ -z \"\${$v+x}\" ] || printf '%s=%s ' $v \"\$$v\""; done)"sh bench/compare.sh"
JOBS=${JOBS:-1}
THREADS=${THREADS:-$([ "$JOBS" -gt 1 ] && echo 1 || echo 2)}
cd "$(dirname "$0")/.."
make -j2 hpt >/dev/null
SHAKE=bench/data/tinyshakespeare.txt
FM=/usr/share/datasets/fashion-mnist

run_workload() {
    name=$1; shift
    out=runs/bench-compare-$name${BENCH_TAG:+-$BENCH_TAG}
    echo "== $name: ./hpt compare $* --out $out" >&2
    start=$(date +%s)
    ./hpt compare "$@" --out "$out"
    end=$(date +%s)
    dst=bench/results/compare-$name${BENCH_TAG:+-$BENCH_TAG}
    mkdir -p "$dst"
    cp "$out/results.json" "$out/results.md" "$out"/val_vs_time.* "$out"/val_vs_step.* "$dst/"
    printf '%s %s\n%s\n' "$called" "$name" "./hpt compare $* --out $out" >"$dst/command.txt"
    echo "$name: $((end - start)) s wall for the whole comparison" >&2
}

workloads=${*:-shakespeare-cpu shakespeare-6x384 fashion-cnn}
# the tuned protocol (the strongest tuned baselines): each arm tuned over
# --schedules cosine (to 10%), d2z, wsd x --lrs on the first seed; arms
# baseline, hybrid (its default predictor: outer), ema, schedule-free and
# hybrid-ema; every arm also at --budgets 0.9 and 0.8 of the steps
# (speedup_budget_to_target). About 110 min (shakespeare-cpu), 50 min
# (fashion-cnn) and 60 min (shakespeare-6x384) on 2 idle cores.
I12="--schedules cosine,d2z,wsd --arms baseline,hybrid,ema,schedule-free,hybrid-ema --budgets 0.9,0.8"
# issue26-*: the same schedules, sweeps (extended until each arm's best rate
# is inside) and budgets, with the arms baseline (the best tuned schedule),
# schedule-free, hybrid (the outer step on the best schedule), hybrid-sf (on
# schedule-free) and the outer step at SNOO's and a 124M wrapper's published
# settings (outer-snoo, outer-124m)
# SEEDS and BUDGETS (default 5 and 0.9,0.8) shrink it where a session cannot
# hold the whole of it: a later call with the defaults, the same binary and
# the same machine reuses the runs already finished. For muon-*, SCHEDULES
# (default cosine,d2z,wsd) and MUON_ARMS (default baseline,muon,hybrid-muon;
# add muon-ns3, Muon with 3 Newton-Schulz steps, or muon-spectral, Muon at
# its own spectral scale with AdamW at the tuned baseline's rate) shrink or change it, and LRS moves the first sweep (a reduced protocol: name
# it with BENCH_TAG).
SEEDS=${SEEDS:-5}
BUDGETS=${BUDGETS:-0.9,0.8}
I26="--schedules cosine,d2z,wsd --arms baseline,hybrid,schedule-free,hybrid-sf,outer-snoo,outer-124m --budgets $BUDGETS"
# muon-*: the arms baseline, muon (Muon with RMS matching, so one swept
# rate serves Muon and AdamW), each tuned over the three schedules x --lrs
# (sweeps extended until the best rate is inside), and hybrid-muon (the
# outer step on Muon at its tuned rate and schedule); the same budgets; the
# workloads above plus the 6x384 GPT at 4x its tokens per step (batch 48),
# where Newton-Schulz's fixed cost per step weighs less against the GEMMs.
IMU="--schedules ${SCHEDULES:-cosine,d2z,wsd} --arms ${MUON_ARMS:-baseline,muon,hybrid-muon} --budgets $BUDGETS"
G6="--n-layer 6 --n-head 6 --n-embd 384 --block-size 64 --max-iters 400 --warmup-iters 40 --eval-iters 20"
for w in $workloads; do
    case $w in
    shakespeare-cpu)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE --eval-iters 20 --lrs 1e-3,2e-3,4e-3,8e-3 --seeds 5 --threads $THREADS --jobs $JOBS ;;
    shakespeare-6x384)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE --n-layer 6 --n-head 6 --n-embd 384 --block-size 64 --batch-size 12 \
            --max-iters 400 --warmup-iters 40 --eval-iters 20 --lrs 5e-4,1e-3,2e-3,4e-3 --seeds 3 --arms baseline,hybrid,ema \
            --threads $THREADS --jobs $JOBS ;;
    fashion-cnn)
        [ -d $FM ] || { echo "compare.sh: $FM missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
        run_workload $w --task fashion-mnist --model cnn --epochs 2 --eval-interval 94 --lrs 1e-3,2e-3,4e-3,8e-3 \
            --seeds 5 --threads $THREADS --jobs $JOBS ;;
    tuned-shakespeare-cpu)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE --eval-iters 20 --lrs 3e-3,4e-3,6e-3 --seeds 5 $I12 --threads $THREADS --jobs $JOBS ;;
    tuned-shakespeare-6x384)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE --n-layer 6 --n-head 6 --n-embd 384 --block-size 64 --batch-size 12 \
            --max-iters 400 --warmup-iters 40 --eval-iters 20 --lrs 5e-4,1e-3,2e-3 --seeds 3 $I12 --threads $THREADS --jobs $JOBS ;;
    tuned-fashion-cnn)
        [ -d $FM ] || { echo "compare.sh: $FM missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
        run_workload $w --task fashion-mnist --model cnn --epochs 2 --eval-interval 94 --lrs 2e-3,4e-3,8e-3 \
            --seeds 5 $I12 --threads $THREADS --jobs $JOBS ;;
    issue26-shakespeare-cpu)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE --eval-iters 20 --lrs 3e-3,4e-3,6e-3 --seeds $SEEDS $I26 --threads $THREADS --jobs $JOBS ;;
    issue26-fashion-cnn)
        [ -d $FM ] || { echo "compare.sh: $FM missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
        run_workload $w --task fashion-mnist --model cnn --epochs 2 --eval-interval 94 --lrs 2e-3,4e-3,8e-3 \
            --seeds $SEEDS $I26 --threads $THREADS --jobs $JOBS ;;
    muon-shakespeare-cpu)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE --eval-iters 20 --lrs ${LRS:-2e-3,4e-3,8e-3} --seeds $SEEDS $IMU --threads $THREADS --jobs $JOBS ;;
    muon-shakespeare-6x384)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE $G6 --batch-size 12 --lrs ${LRS:-5e-4,1e-3,2e-3} --seeds $SEEDS $IMU --threads $THREADS --jobs $JOBS ;;
    muon-shakespeare-6x384-b48)
        [ -f $SHAKE ] || { echo "compare.sh: $SHAKE missing" >&2; exit 1; }
        run_workload $w --data $SHAKE $G6 --batch-size 48 --lrs ${LRS:-1e-3,2e-3,4e-3} --seeds $SEEDS $IMU --threads $THREADS --jobs $JOBS ;;
    muon-fashion-cnn)
        [ -d $FM ] || { echo "compare.sh: $FM missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
        run_workload $w --task fashion-mnist --model cnn --epochs 2 --eval-interval 94 --lrs ${LRS:-2e-3,4e-3,8e-3} \
            --seeds $SEEDS $IMU --threads $THREADS --jobs $JOBS ;;
    *) echo "compare.sh: unknown workload '$w' (shakespeare-cpu, shakespeare-6x384, fashion-cnn," \
            "tuned-shakespeare-cpu, tuned-shakespeare-6x384, tuned-fashion-cnn, issue26-shakespeare-cpu," \
            "issue26-fashion-cnn, muon-shakespeare-cpu, muon-shakespeare-6x384, muon-shakespeare-6x384-b48," \
            "muon-fashion-cnn)" >&2; exit 2 ;;
    esac
done
