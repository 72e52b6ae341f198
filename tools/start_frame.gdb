# Stop tests/images/start.py (CPython 3.8-3.10, built with debug
# information: pyenv's builds) as a new thread enters its first frame
# (threading's Thread._bootstrap, without a caller): at the moment it has
# just become the thread's current frame and is not yet marked executing.
# Used by tools/record_images.sh "start": the target is left stopped
# (SIGSTOP queued at detach) for record_image.
set pagination off
set confirm off
break _PyEval_EvalFrameDefault if f->f_back == 0 && $_streq((char*)((PyASCIIObject*)f->f_code->co_name + 1), "_bootstrap")
continue
delete
# A software watchpoint (single steps): hardware ones do not fire in
# every virtual machine.
set can-use-hw-watchpoints 0
watch -l ((PyThreadState*)_PyRuntime.gilstate.tstate_current._value)->frame
continue
delete
print ((PyThreadState*)_PyRuntime.gilstate.tstate_current._value)->frame == f
print f->f_back
queue-signal SIGSTOP
detach
quit
