/*
 * llmc/cli.h — the one command-line parser of every tool: the trainers (through llmc/flags.h), the sampling
 * tools (llmc/sample_cli.h) and prepare_data.
 *
 * A tool describes its flags as a table of CliFlag rows, each naming a field of its options struct (offset)
 * and that field's type; cli_parse fills the struct from argv, defaults first. So every tool accepts the same
 * forms and answers a mistake the same way:
 *   `-x 5`, `--name 5`, `--name=5`, `-x=5`; a CLI_BOOL flag takes an optional 0|1 (alone: 1); a CLI_STRS
 *   flag is repeatable (each value appended to its CliList); a string flag with choices ("a|b|c") takes
 *   only those words. Defaults are text, parsed by the same code as a user's value (NULL: a string not
 *   given is NULL, a number 0).
 *   A bad value, a missing value (the next argument being a flag: `-o --resume`), an empty string (`-o ""`:
 *   an unset variable, not the default), an unknown flag (with a "did you mean" within a few edits, and a hint for
 *   "-lr" or "-b4") or a bare argument: one line "error: ... (see --help)" on stderr, exit status 2.
 *   -h/--help prints the help, --help-markdown the flags as a markdown table, to stdout, exit 0.
 * No global state: the tables are the tools' constants.
 */
#ifndef LLMC_CLI_H
#define LLMC_CLI_H

#include "llmc/fileio.h" /* first: it sets the feature macros; usagef, edit_distance, malloc_check */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { CLI_STR, CLI_STRS, CLI_INT, CLI_LONG, CLI_FLOAT, CLI_DOUBLE, CLI_BOOL } CliType;

/* the field of a CLI_STRS flag: its values in order (items: allocated by cli_set, the caller frees it) */
typedef struct {
    const char** items;
    int count;
} CliList;

typedef struct {
    const char* short_name;    /* "-b"; NULL: none */
    const char* long_name;     /* "--batch-size" */
    CliType type;              /* of the field: const char*, CliList, int, long, float, double, int (0|1) */
    size_t offset;             /* of the field in the options struct */
    const char* default_value; /* as a user would write it; NULL: not given (the help then says what that means) */
    double min, max;           /* numbers: the accepted range, both ends included */
    const char* choices;       /* strings: the only words accepted, "a|b|c"; NULL: any */
    const char* help;
} CliFlag;

typedef struct {
    const CliFlag* flags;
    int count;
    const char* usage;       /* the help's first line, after "usage: " */
    const char* string_hint; /* a bare argument after a string flag's value: what it probably was (NULL: none) */
    const char* bare_hint;   /* any other bare argument (NULL: none) */
} CliSpec;

static inline const char* cli_type_name_(const CliFlag* f) {
    switch (f->type) {
    case CLI_STR:
    case CLI_STRS: return f->choices ? "name" : "str";
    case CLI_INT:
    case CLI_LONG: return "int";
    case CLI_FLOAT:
    case CLI_DOUBLE: return "float";
    case CLI_BOOL: return "0|1";
    }
    return "?";
}

/* 1 if word is one of choices' '|'-separated words */
static inline int cli_choice_(const char* choices, const char* word) {
    size_t n = strlen(word);
    for (const char* p = choices; *p;) {
        size_t len = strcspn(p, "|");
        if (len == n && strncmp(p, word, n) == 0) return 1;
        p += len + (p[len] == '|');
    }
    return 0;
}

/* Parses text (NULL: the flag not given) as f's type into its field of opts; a bad value: usagef. */
static inline void cli_set(const CliFlag* f, void* opts, const char* text) {
    char* field = (char*)opts + f->offset;
    if (f->type == CLI_STRS) {
        if (!text) return;
        CliList* list = (CliList*)field;
        list->items = (const char**)realloc_check(list->items, (size_t)(list->count + 1) * sizeof(char*));
        list->items[list->count++] = text;
        return;
    }
    if (f->type == CLI_STR) {
        if (text && f->choices && !cli_choice_(f->choices, text))
            usagef("%s: bad value '%s': expected %s", f->long_name, text, f->choices);
        *(const char**)field = text;
        return;
    }
    if (!text) text = "0";
    /* decimal only, as argparse's int() and float(): strtoll and strtod would skip leading white space, strtod read hex */
    int plain = !isspace((unsigned char)text[0]) && !strpbrk(text, "xX");
    char* end;
    errno = 0;
    if (f->type == CLI_INT || f->type == CLI_LONG || f->type == CLI_BOOL) {
        long long v = strtoll(text, &end, 10);
        if (!plain || end == text || *end != '\0' || errno == ERANGE || v < f->min || v > f->max) {
            if (f->type == CLI_BOOL) usagef("%s: bad value '%s': expected 0 or 1, or nothing (1)", f->long_name, text);
            usagef("%s: bad value '%s': expected an integer in [%.0f, %.0f]", f->long_name, text, f->min, f->max);
        }
        if (f->type == CLI_LONG) *(long*)field = (long)v;
        else *(int*)field = (int)v;
    } else {
        double v = strtod(text, &end);
        int as_float = f->type == CLI_FLOAT;
        if (!plain || end == text || *end != '\0' || !isfinite(v) || v < f->min || v > f->max || (as_float && !isfinite((float)v)))
            usagef("%s: bad value '%s': expected a finite number in [%g, %g]", f->long_name, text, f->min, f->max);
        if (v != 0.0 && (errno == ERANGE || (as_float && (float)v == 0.0f))) /* not silently 0 */
            usagef("%s: bad value '%s': too close to 0 to be held (it would be 0)", f->long_name, text);
        if (as_float) *(float*)field = (float)v;
        else *(double*)field = v;
    }
}

/* every flag of spec at its default (CLI_STRS: no values) */
static inline void cli_defaults(const CliSpec* spec, void* opts) {
    for (int i = 0; i < spec->count; i++) {
        const CliFlag* f = &spec->flags[i];
        if (f->type == CLI_STRS) *(CliList*)((char*)opts + f->offset) = (CliList){NULL, 0};
        else cli_set(f, opts, f->default_value);
    }
}

static inline const char* cli_default_text_(const CliFlag* f) {
    return f->default_value && f->default_value[0] ? f->default_value : "none";
}

/* one flag's value as text, as the parser would accept it and read back as the same value ("none" for a string not
 * given; CLI_STRS: its values joined by spaces) */
static inline void cli_format(char* out, size_t cap, const CliFlag* f, const void* opts) {
    const char* field = (const char*)opts + f->offset;
    switch (f->type) {
    case CLI_STR: {
        const char* v = *(const char* const*)field;
        snprintf(out, cap, "%s", v && v[0] ? v : "none");
        break;
    }
    case CLI_STRS: {
        const CliList* list = (const CliList*)field;
        size_t n = 0;
        out[0] = '\0';
        for (int i = 0; i < list->count && n < cap; i++) n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? " " : "", list->items[i]);
        if (list->count == 0) snprintf(out, cap, "none");
        break;
    }
    case CLI_INT:
    case CLI_BOOL: snprintf(out, cap, "%d", *(const int*)field); break;
    case CLI_LONG: snprintf(out, cap, "%ld", *(const long*)field); break;
    case CLI_FLOAT:
    case CLI_DOUBLE: { /* the fewest digits (from 6) that read back as the same value */
        double v = f->type == CLI_FLOAT ? (double)*(const float*)field : *(const double*)field;
        for (int digits = 6; digits <= 17; digits++) {
            snprintf(out, cap, "%.*g", digits, v);
            if (f->type == CLI_FLOAT ? strtof(out, NULL) == (float)v : strtod(out, NULL) == v) break;
        }
        break;
    }
    }
}

/* 1 if f's field holds the same value in a and b (strings by content, NULL only equal to NULL) */
static inline int cli_equal(const CliFlag* f, const void* a, const void* b) {
    const char *x = (const char*)a + f->offset, *y = (const char*)b + f->offset;
    switch (f->type) {
    case CLI_STR: {
        const char *s = *(const char* const*)x, *t = *(const char* const*)y;
        return s && t ? strcmp(s, t) == 0 : s == t;
    }
    case CLI_STRS: {
        const CliList *s = (const CliList*)x, *t = (const CliList*)y;
        if (s->count != t->count) return 0;
        for (int i = 0; i < s->count; i++)
            if (strcmp(s->items[i], t->items[i]) != 0) return 0;
        return 1;
    }
    case CLI_INT:
    case CLI_BOOL: return *(const int*)x == *(const int*)y;
    case CLI_LONG: return *(const long*)x == *(const long*)y;
    case CLI_FLOAT: return *(const float*)x == *(const float*)y;
    case CLI_DOUBLE: return *(const double*)x == *(const double*)y;
    }
    return 0;
}

static inline void cli_print_help(FILE* out, const CliSpec* spec) {
    fprintf(out, "usage: %s\n\n", spec->usage);
    for (int i = 0; i < spec->count; i++) {
        const CliFlag* f = &spec->flags[i];
        char names[64];
        snprintf(names, sizeof(names), "%s%s%s %s", f->short_name ? f->short_name : "", f->short_name ? ", " : "    ", f->long_name,
                 cli_type_name_(f));
        if (f->default_value) fprintf(out, "  %-30s %s (default: %s)\n", names, f->help, cli_default_text_(f));
        else fprintf(out, "  %-30s %s\n", names, f->help);
    }
    fprintf(out, "  %-30s %s\n", "-h, --help", "print this help and exit");
    fprintf(out, "  %-30s %s\n", "    --help-markdown", "print the flags as a markdown table and exit");
}

/* text as a markdown table cell: every '|' escaped, which would otherwise end the cell (in code spans too) */
static inline void cli_markdown_cell_(FILE* out, const char* text) {
    for (; *text; text++) {
        if (*text == '|') fputc('\\', out);
        fputc(*text, out);
    }
}

static inline void cli_print_markdown(FILE* out, const CliSpec* spec) {
    fprintf(out, "| short | long | type | default | meaning |\n|---|---|---|---|---|\n");
    for (int i = 0; i < spec->count; i++) {
        const CliFlag* f = &spec->flags[i];
        const char* cells[3] = {cli_type_name_(f), cli_default_text_(f), f->help};
        fprintf(out, "| %s | `%s` |", f->short_name ? f->short_name : "", f->long_name);
        for (int c = 0; c < 3; c++) {
            fputc(' ', out);
            cli_markdown_cell_(out, cells[c]);
            fputs(" |", out);
        }
        fputc('\n', out);
    }
    fprintf(out, "| -h | `--help` | | | print the help and exit |\n");
}

/* the flag named name[0..len) (long or short form), or NULL */
static inline const CliFlag* cli_find(const CliSpec* spec, const char* name, size_t len) {
    for (int i = 0; i < spec->count; i++) {
        const CliFlag* f = &spec->flags[i];
        if ((strlen(f->long_name) == len && strncmp(f->long_name, name, len) == 0) ||
            (f->short_name && strlen(f->short_name) == len && strncmp(f->short_name, name, len) == 0))
            return f;
    }
    return NULL;
}

/* usagef for an unknown flag: "-lr" meant "--lr", "-b4" meant "-b 4", or the nearest long name by edits */
static inline void cli_unknown_(const CliSpec* spec, const char* name) {
    if (name[1] != '-' && strlen(name) > 2) {
        char dashed[130];
        snprintf(dashed, sizeof(dashed), "-%s", name);
        if (cli_find(spec, dashed, strlen(dashed))) usagef("unknown flag '%s', did you mean %s?", name, dashed);
        const char* rest = name + 2;
        int numeric = (rest[0] >= '0' && rest[0] <= '9') || ((rest[0] == '-' || rest[0] == '.') && rest[1] >= '0' && rest[1] <= '9');
        for (int i = 0; i < spec->count; i++) {
            const CliFlag* f = &spec->flags[i];
            if (f->short_name && f->short_name[1] == name[1] && (numeric || f->type == CLI_STR || f->type == CLI_STRS))
                usagef("unknown flag '%s': a short flag takes its value as the next argument (%s %s)", name, f->short_name, rest);
        }
    }
    const char* best = NULL;
    size_t letters = strspn(name, "-") < strlen(name) ? strlen(name) - strspn(name, "-") : 0;
    int best_d = letters <= 4 ? 2 : letters <= 8 ? 3 : 4; /* suggest only names within 1, 2 or 3 edits, by length */
    for (int i = 0; i < spec->count; i++) {
        int d = edit_distance(name, spec->flags[i].long_name);
        if (d < best_d) {
            best_d = d;
            best = spec->flags[i].long_name;
        }
    }
    if (best) usagef("unknown flag '%s', did you mean %s?", name, best);
    usagef("unknown flag '%s'", name);
}

/* Fills opts from argv (defaults first) as the header's comment says. */
static inline void cli_parse(const CliSpec* spec, void* opts, int argc, char** argv) {
    cli_defaults(spec, opts);
    for (int i = 1; i < argc; i++) {
        const char* arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            cli_print_help(stdout, spec);
            exit(0);
        }
        if (strcmp(arg, "--help-markdown") == 0) {
            cli_print_markdown(stdout, spec);
            exit(0);
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            const CliFlag* before = i > 2 && argv[i - 1][0] != '-' ? cli_find(spec, argv[i - 2], strlen(argv[i - 2])) : NULL;
            const char* hint = before && (before->type == CLI_STR || before->type == CLI_STRS) && spec->string_hint ? spec->string_hint
                                                                                                                  : spec->bare_hint;
            usagef("unexpected argument '%s' (flags start with -%s%s)", arg, hint ? "; " : "", hint ? hint : "");
        }
        const char* eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        const CliFlag* f = cli_find(spec, arg, name_len);
        if (!f) {
            char name[128];
            snprintf(name, sizeof(name), "%.*s", (int)(name_len < 127 ? name_len : 127), arg);
            cli_unknown_(spec, name);
        }
        const char* value;
        if (eq) value = eq + 1;
        else if (f->type == CLI_BOOL) {
            int has = i + 1 < argc && (strcmp(argv[i + 1], "0") == 0 || strcmp(argv[i + 1], "1") == 0);
            if (!has && i + 1 < argc && argv[i + 1][0] >= '0' && argv[i + 1][0] <= '9')
                usagef("%s: bad value '%s': expected 0 or 1, or nothing (1)", f->long_name, argv[i + 1]);
            value = has ? argv[++i] : "1";
        } else if (i + 1 < argc) {
            const char* next = argv[i + 1];
            if (next[0] == '-' && next[1] != '\0' && cli_find(spec, next, strcspn(next, "=")))
                usagef("%s: missing value: the next argument, '%s', is a flag (write %s=%s if it is the value)", f->long_name, next,
                       f->long_name, next);
            value = argv[++i];
        } else usagef("%s: missing value", f->long_name);
        if ((f->type == CLI_STR || f->type == CLI_STRS) && value[0] == '\0')
            usagef("%s: empty value (an unset variable?); leave the flag out for its default", f->long_name);
        cli_set(f, opts, value);
    }
}

#endif
