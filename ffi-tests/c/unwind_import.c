// The shape of libwsp_ggml_backend.so before it stopped importing the unwinder: a shared library that
// imports the unwinder (_Unwind_Resume, what landing pads call) without
// naming libgcc_s as needed. dlopen_host.c must fail to load it, which shows
// that the host really brings no unwinder.
extern void _Unwind_Resume(void * exception);

void unwind_import_resume(void * exception) {
    _Unwind_Resume(exception);
}
