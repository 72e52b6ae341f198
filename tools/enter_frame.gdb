# Stop aba.py (tests/images) as a2 calls spin, at the moment spin's frame
# has just become the thread's current one and is not yet marked executing
# (CPython 3.8-3.10, built with debug information: pyenv's builds). Used by
# tools/record_images.sh "enter": the target is left stopped (SIGSTOP
# queued at detach) for record_image.
set pagination off
set confirm off
break _PyEval_EvalFrameDefault if $_streq((char*)((PyASCIIObject*)f->f_code->co_name + 1), "spin")
continue
delete
watch -l ((PyThreadState*)_PyRuntime.gilstate.tstate_current._value)->frame
continue
delete
print ((PyThreadState*)_PyRuntime.gilstate.tstate_current._value)->frame == f
print ((PyThreadState*)_PyRuntime.gilstate.tstate_current._value)->frame->f_lasti
queue-signal SIGSTOP
detach
quit
