/* Fuzz harness: llmc/flags.h flags_parse on an argv made from the input's NUL- or newline-separated
 * pieces (at most 63). -h/--help/--help-markdown are left out: they print and exit(0) by design. */
#include "dev/fuzz/fuzz_common.h"
#include "llmc/flags.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    char* text = (char*)malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char* argv[64] = {(char*)"train_gpt"};
    int argc = 1;
    for (char *p = text, *end = text + size; p <= end && argc < 64;) {
        char* q = p;
        while (q < end && *q != '\0' && *q != '\n') q++;
        *q = '\0';
        if (strcmp(p, "-h") == 0 || strcmp(p, "--help") == 0 || strncmp(p, "--help-", 7) == 0) {
            free(text);
            return 0;
        }
        argv[argc++] = p;
        p = q + 1;
    }
    FILE* devnull = fopen("/dev/null", "w");
    int saved_stderr = devnull ? dup(2) : -1;
    if (saved_stderr < 0 || dup2(fileno(devnull), 2) < 0) abort(); /* the harness's own failure, as fuzz_file's */
    /* stderr is /dev/null now: the parser's one-line errors are expected here */
    FUZZ_RUN({
        TrainArgs a;
        flags_parse(&a, argc, argv, "train_gpt");
        char value[4096];
        for (int i = 0; i < FLAG_COUNT; i++) cli_format(value, sizeof(value), &FLAG_SPECS[i], &a);
    });
    if (dup2(saved_stderr, 2) < 0 || close(saved_stderr) != 0 || fclose(devnull) != 0) abort();
    free(text);
    return 0;
}
