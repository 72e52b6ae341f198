# Stop tests/images/enter_c.py (CPython 3.11 or 3.12, built with debug
# information: pyenv's builds) as next() enters the generator `values`:
# just after the evaluation loop made its own _PyCFrame the thread's cframe
# (the first store to tstate->cframe, at offset 56, in
# _PyEval_EvalFrameDefault) and before it filled that in. Used by
# tools/record_images.sh "enterc": the target is left stopped (SIGSTOP
# queued at detach) for record_image.
set pagination off
set confirm off
break *_PyEval_EvalFrameDefault if $_streq((char*)((PyASCIIObject*)((_PyInterpreterFrame*)$rsi)->f_code->co_name + 1), "values")
continue
delete
python
import re
lines = gdb.execute("disassemble $pc,+400", to_string=True).splitlines()
for i, line in enumerate(lines):
    if re.search(r",0x38\(%rdi\)\s*$", line):
        after = lines[i + 1].split()[0]
        gdb.execute("tbreak *" + after)
        break
end
continue
print ((PyThreadState*)$rdi)->cframe->current_frame
print ((PyThreadState*)$rdi)->cframe->previous
queue-signal SIGSTOP
detach
quit
