#!/bin/sh
# Re-record the images of tests/images (make images): for each version,
# run tests/images/aba.py and record two moments of it, one in each chain
# (aba-3.X-a.img at spin <- a2, aba-3.X-b.img at spin <- b2), each holding
# the pages both moments read (tests/tools/record_image.c). Needs root,
# the pyenv builds and the sid root (scripts/sidroot.sh ensure).
#   tools/record_images.sh BUILD_DIR [VERSION...]   (e.g. 3.12 3.15)
# PYSTROBE_IMAGES_OUT: where the images go (default tests/images; the
# programs are read from there too).
# "pos" as a version records tests/images/pos.py under 3.15 instead
# (pos-3.15-a.img at spin <- a2, pos-3.15-b.img at spin2 <- a2).
# "enter" records enter-3.8/3.9/3.10.img: aba.py stopped by gdb
# (tools/enter_frame.gdb) as spin's frame is entered, before it executes.
# "grow" records tests/images/grow.py under 3.12 and 3.14 (grow-3.X-a.img
# at spin <- shallow, grow-3.X-b.img 41 calls deeper, spin <- deep).
# "splice" records tests/images/splice.py under 3.11, 3.12 and 3.13
# (splice-3.X-a.img in a2 <- a1, splice-3.X-b.img at spin_b <- b2).
# "tops" records tests/images/tops.py under 3.11-3.15 (tops-3.X-a.img at
# spin_a <- a2, tops-3.X-b.img at spin_b <- b2).
# "start" records start-3.8/3.9/3.10.img: tests/images/start.py stopped by
# gdb (tools/start_frame.gdb) as a new thread's first frame is entered,
# before it executes.
# "heap" records tests/images/heap.py under 3.11-3.15 (heap-3.X-a.img at
# ga3 <- ga2 <- ga1, generators; heap-3.X-b.img at ca3 <- ca2 <- ca1,
# coroutines: their frames on the heap, at the same addresses).
# "enterc" records enterc-3.11/3.12.img: tests/images/enter_c.py stopped by
# gdb (tools/enter_c.gdb) as a generator is entered from C, before the
# evaluation loop fills in its _PyCFrame.
# "gens" records tests/images/gens.py under 3.12-3.15 (gens-3.X-a.img at
# inner <- outer <- main, gens-3.X-b.img at outer <- main, inner suspended).
# "cgens" records tests/images/cgens.py under 3.12-3.15 (cgens-3.X-a.img
# at outer <- main, pulled by next(), cgens-3.X-b.img at spin <- main, pulled
# the same way, outer suspended).
# "awaits" records tests/images/awaits.py under 3.12-3.15 (awaits-3.X-a.img
# at take <- getter <- stage, awaits-3.X-b.img at c2 <- c1 <- stage).
# "yield" records yield-3.12.img: tests/images/yield.py stopped at random
# moments until gdb (tools/yield_frame.gdb) finds it inside inner's yield,
# inner's frame unlinked from its caller and still the thread's current one.
# "init" records tests/images/init.py under 3.13-3.15 (init-3.X.img at
# spin <- __init__ <- make: an __init__ called through CPython's shim).
set -eu
B=${1:?usage: record_images.sh BUILD_DIR [VERSION...]}
shift
ROOT=${PYSTROBE_IMAGES_SIDROOT:-.cache/sid-root}
OUT=${PYSTROBE_IMAGES_OUT:-tests/images}
# at_gdb_stop NAME SCRIPT GDBFILE SPEC VERSION...: for each pyenv VERSION,
# run tests/images/SCRIPT, let gdb stop it (tools/GDBFILE), and record it
# to tests/images/NAME-3.X.img (SPEC: what follows the file name, e.g.
# ":main,<module>"): that moment or none (record_image --stopped, which
# never lets the target go on to a later one). Three tries, each with a
# new process, as gdb's conditional breakpoint sometimes misses; each
# failed try is said, and the script fails after the third.
at_gdb_stop() {
    name=$1 script=$2 gdbfile=$3 spec=$4
    shift 4
    mkdir -p /tmp/pystrobe-images
    cp "$OUT/$script" "/tmp/pystrobe-images/$script"
    for pv in "$@"; do
        rc=1
        for try in 1 2 3; do
            "$(pyenv prefix $pv)/bin/python3" -B "/tmp/pystrobe-images/$script" 60 & pid=$!
            sleep 1
            rc=0
            gdb -p $pid -batch -x "$PWD/tools/$gdbfile" >/dev/null 2>&1 || rc=$?
            [ $rc -eq 0 ] || echo "record_images: $name $pv, try $try: gdb failed (status $rc)" >&2
            # The queued SIGSTOP is taken as gdb lets go: wait for it
            # (record_image --stopped says if it never came).
            for _ in 1 2 3 4 5 6 7 8 9 10; do
                grep -q '^State:.*T' /proc/$pid/status && break
                sleep 0.2
            done
            [ $rc -eq 0 ] && { "$B/tests/record_image" --stopped $pid "$OUT/$name-${pv%.*}.img$spec" || rc=$?; }
            kill -9 $pid 2>/dev/null || true
            wait $pid 2>/dev/null || true
            [ $rc -eq 0 ] && break
            echo "record_images: $name $pv, try $try failed (said above)" >&2
        done
        [ $rc -eq 0 ] || { echo "record_images: $name $pv failed three times: not recorded" >&2; exit 1; }
    done
}

# interp_for 3.X: the command that runs CPython 3.X here (a pyenv build for
# 3.11-3.13, else the sid root's).
interp_for() {
    case $1 in
    3.11) echo "$(pyenv prefix 3.11.7)/bin/python3" ;;
    3.12) echo "$(pyenv prefix 3.12.1)/bin/python3" ;;
    3.13) echo "$(pyenv prefix 3.13.0)/bin/python3" ;;
    *) echo "chroot $ROOT /usr/bin/python$1" ;;
    esac
}
# two_moments NAME A_FUNCS B_FUNCS VERSION...: for each VERSION (3.X), run
# tests/images/NAME.py and record NAME-3.X-a.img at the moment its stack is
# A_FUNCS (innermost first, comma-separated) and NAME-3.X-b.img at B_FUNCS,
# each holding the pages both moments read.
two_moments() {
    name=$1 a=$2 b=$3
    shift 3
    mkdir -p /tmp/pystrobe-images "$ROOT/tmp/pystrobe-images"
    cp $OUT/$name.py /tmp/pystrobe-images/$name.py
    cp $OUT/$name.py "$ROOT/tmp/pystrobe-images/$name.py"
    for tv in "$@"; do
        $(interp_for $tv) -B /tmp/pystrobe-images/$name.py 60 & pid=$!
        sleep 1
        rc=0
        "$B/tests/record_image" $pid -:$a -:$b \
            "$OUT/$name-$tv-a.img:$a" "$OUT/$name-$tv-b.img:$b" || rc=$?
        kill $pid 2>/dev/null || true
        wait $pid 2>/dev/null || true
        [ $rc -eq 0 ] || { echo "record_images: $name $tv failed" >&2; exit 1; }
    done
}

[ $# -gt 0 ] || set -- 3.8 3.9 3.10 3.11 3.12 3.13 3.14 3.15 pos enter grow splice init enterc yield tops heap start gens cgens awaits
for v in "$@"; do
    if [ "$v" = start ]; then
        at_gdb_stop start start.py start_frame.gdb "" ${PYSTROBE_START_VERSIONS:-3.8.18 3.9.18 3.10.13}
        continue
    fi
    if [ "$v" = heap ]; then
        two_moments heap ga3,ga2,ga1 ca3,ca2,ca1 ${PYSTROBE_HEAP_VERSIONS:-3.11 3.12 3.13 3.14 3.15}
        continue
    fi
    if [ "$v" = tops ]; then
        two_moments tops spin_a,a2 spin_b,b2 3.11 3.12 3.13 3.14 3.15
        continue
    fi
    if [ "$v" = awaits ]; then
        two_moments awaits take,getter,stage c2,c1,stage ${PYSTROBE_AWAITS_VERSIONS:-3.12 3.13 3.14 3.15}
        continue
    fi
    if [ "$v" = gens ]; then
        two_moments gens inner,outer,main outer,main 3.12 3.13 3.14 3.15
        continue
    fi
    if [ "$v" = cgens ]; then
        two_moments cgens outer,main spin,main 3.12 3.13 3.14 3.15
        continue
    fi
    if [ "$v" = splice ]; then
        two_moments splice a2,a1 spin_b,b2 3.11 3.12 3.13
        continue
    fi
    if [ "$v" = yield ]; then
        mkdir -p /tmp/pystrobe-images
        cp $OUT/yield.py /tmp/pystrobe-images/yield.py
        "$(pyenv prefix 3.12.1)/bin/python3" -B /tmp/pystrobe-images/yield.py 600 & pid=$!
        sleep 1
        rc=1
        for _ in $(seq 1000); do
            kill -STOP $pid
            until grep -q '^State:.*T' /proc/$pid/status; do sleep 0.01; done
            if gdb -p $pid -batch -nx -x "$PWD/tools/yield_frame.gdb" >/dev/null 2>&1; then
                rc=0
                "$B/tests/record_image" --stopped $pid "$OUT/yield-3.12.img" || rc=$?
                break
            fi
            kill -CONT $pid
            sleep 0.0$((RANDOM % 10))
        done
        kill -9 $pid 2>/dev/null || true
        wait $pid 2>/dev/null || true
        [ $rc -eq 0 ] || { echo "record_images: yield 3.12 not recorded" >&2; exit 1; }
        continue
    fi
    if [ "$v" = enterc ]; then
        at_gdb_stop enterc enter_c.py enter_c.gdb ":main,<module>" 3.11.7 3.12.1
        continue
    fi
    if [ "$v" = init ]; then
        mkdir -p /tmp/pystrobe-images "$ROOT/tmp/pystrobe-images"
        cp $OUT/init.py /tmp/pystrobe-images/init.py
        cp $OUT/init.py "$ROOT/tmp/pystrobe-images/init.py"
        for iv in 3.13 3.14 3.15; do
            case $iv in
            3.13) run="$(pyenv prefix 3.13.0)/bin/python3" ;;
            *) run="chroot $ROOT /usr/bin/python$iv" ;;
            esac
            $run -B /tmp/pystrobe-images/init.py 60 & pid=$!
            sleep 1
            rc=0
            "$B/tests/record_image" $pid "$OUT/init-$iv.img:spin,Made.__init__,make" || rc=$?
            kill $pid 2>/dev/null || true
            wait $pid 2>/dev/null || true
            [ $rc -eq 0 ] || { echo "record_images: init $iv failed" >&2; exit 1; }
        done
        continue
    fi
    if [ "$v" = grow ]; then
        mkdir -p /tmp/pystrobe-images "$ROOT/tmp/pystrobe-images"
        cp $OUT/grow.py /tmp/pystrobe-images/grow.py
        cp $OUT/grow.py "$ROOT/tmp/pystrobe-images/grow.py"
        for gv in 3.12 3.14; do
            case $gv in
            3.12) run="$(pyenv prefix 3.12.1)/bin/python3" ;;
            3.14) run="chroot $ROOT /usr/bin/python3.14" ;;
            esac
            $run -B /tmp/pystrobe-images/grow.py 60 & pid=$!
            sleep 1
            rc=0
            "$B/tests/record_image" $pid -:spin,shallow -:spin,deep \
                "$OUT/grow-$gv-a.img:spin,shallow" "$OUT/grow-$gv-b.img:spin,deep" || rc=$?
            kill $pid 2>/dev/null || true
            wait $pid 2>/dev/null || true
            [ $rc -eq 0 ] || { echo "record_images: grow $gv failed" >&2; exit 1; }
        done
        continue
    fi
    if [ "$v" = enter ]; then
        at_gdb_stop enter aba.py enter_frame.gdb ":a2,a1" 3.8.18 3.9.18 3.10.13
        continue
    fi
    if [ "$v" = pos ]; then
        mkdir -p "$ROOT/tmp/pystrobe-images"
        cp $OUT/pos.py "$ROOT/tmp/pystrobe-images/pos.py"
        chroot $ROOT /usr/bin/python3.15 -B /tmp/pystrobe-images/pos.py 60 & pid=$!
        sleep 1
        rc=0
        "$B/tests/record_image" $pid -:spin,a2 -:spin2,a2 \
            "$OUT/pos-3.15-a.img:spin,a2" "$OUT/pos-3.15-b.img:spin2,a2" || rc=$?
        kill $pid 2>/dev/null || true
        wait $pid 2>/dev/null || true
        [ $rc -eq 0 ] || { echo "record_images: pos failed" >&2; exit 1; }
        continue
    fi
    case $v in
    3.8) run="$(pyenv prefix 3.8.18)/bin/python3 -B $OUT/aba.py" ;;
    3.9) run="$(pyenv prefix 3.9.18)/bin/python3 -B $OUT/aba.py" ;;
    3.10) run="$(pyenv prefix 3.10.13)/bin/python3 -B $OUT/aba.py" ;;
    3.11) run="$(pyenv prefix 3.11.7)/bin/python3 -B $OUT/aba.py" ;;
    3.12) run="$(pyenv prefix 3.12.1)/bin/python3 -B $OUT/aba.py" ;;
    3.13) run="$(pyenv prefix 3.13.0)/bin/python3 -B $OUT/aba.py" ;;
    3.14|3.15)
        mkdir -p "$ROOT/tmp/pystrobe-images"
        cp $OUT/aba.py "$ROOT/tmp/pystrobe-images/aba.py"
        run="chroot $ROOT /usr/bin/python$v -B /tmp/pystrobe-images/aba.py" ;;
    *) echo "record_images: unknown version $v" >&2; exit 2 ;;
    esac
    # The same path in every image: the file name is part of the stacks.
    case $run in chroot*) ;; *) run=$(echo "$run" | sed "s#$OUT/aba.py#/tmp/pystrobe-images/aba.py#")
        mkdir -p /tmp/pystrobe-images; cp $OUT/aba.py /tmp/pystrobe-images/aba.py ;; esac
    $run 60 & pid=$!
    sleep 1
    rc=0
    "$B/tests/record_image" $pid -:spin,a2 -:spin,b2 \
        "$OUT/aba-$v-a.img:spin,a2" "$OUT/aba-$v-b.img:spin,b2" || rc=$?
    kill $pid 2>/dev/null || true
    wait $pid 2>/dev/null || true
    [ $rc -eq 0 ] || { echo "record_images: $v failed" >&2; exit 1; }
done
