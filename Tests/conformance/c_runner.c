/*
 * The C producer's runner of the conformance table (Tests/conformance/cases.txt; its head says
 * the operations): runs every case through ringside_producer.h, each case's bot in DIR.
 *
 *   c_runner CASES DIR
 *
 * Exit status 0: every case ran; 1: an operation failed (stderr names the case and line); 2: usage.
 */
#include "ringside_producer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORDS 16
#define MAX_METRICS 16

static const char *cases_path;
static unsigned line_number;

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "%s:%u: %s%s%s\n", cases_path, line_number, what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

/* The value of `key=` in `word`, or NULL. */
static const char *option(const char *word, const char *key) {
    size_t length = strlen(key);
    return strncmp(word, key, length) == 0 && word[length] == '=' ? word + length + 1 : NULL;
}

static int unit_code(const char *name, rs_unit *unit) {
    static const char *const names[] = {"none", "ns", "us", "ms", "s", "bytes"};
    for (int i = 0; i <= RS_UNIT_LAST; i++) {
        if (strcmp(name, names[i]) == 0) {
            *unit = (rs_unit)i;
            return 0;
        }
    }
    return -1;
}

static int merge_code(const char *name, rs_gauge_merge *merge) {
    static const char *const names[] = {"last", "sum", "max", "min", "per_worker"};
    for (unsigned i = 0; i < RS_MERGE_POLICIES; i++) {
        if (strcmp(name, names[i]) == 0) {
            *merge = (rs_gauge_merge)i;
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: c_runner CASES DIR\n");
        return 2;
    }
    cases_path = argv[1];
    FILE *cases = fopen(cases_path, "r");
    if (!cases) {
        perror(cases_path);
        return 2;
    }
    char line[1024], name[RS_NAME_LENGTH_MAX + 1] = "";
    rs_bot *bot = NULL;
    rs_error error;
    char metric_names[MAX_METRICS][RS_NAME_MAX + 1];
    rs_metric metrics[MAX_METRICS];
    unsigned metric_count = 0;
    int skipping = 0; /* the case's attach was refused, as it asked: its other lines are skipped */
    while (fgets(line, sizeof line, cases)) {
        line_number++;
        char *words[MAX_WORDS];
        int count = 0;
        for (char *word = strtok(line, " \n"); word && count < MAX_WORDS; word = strtok(NULL, " \n")) words[count++] = word;
        if (count == 0 || words[0][0] == '#') continue;
        const char *op = words[0];
        if (strcmp(op, "case") == 0 && count == 2) {
            snprintf(name, sizeof name, "%s", words[1]);
            metric_count = 0;
            skipping = 0;
        } else if (skipping || strcmp(op, "plant") == 0) {
            continue; /* the suite plants */
        } else if (strcmp(op, "attach") == 0) {
            rs_bot_options options = {0};
            options.directory = argv[2];
            int refused = 0;
            for (int i = 1; i < count; i++) {
                const char *v;
                if ((v = option(words[i], "lane_capacity"))) options.lane_capacity = strtoull(v, NULL, 10);
                else if ((v = option(words[i], "max_metrics"))) options.max_metrics = (uint32_t)strtoul(v, NULL, 10);
                else if ((v = option(words[i], "max_lanes"))) options.max_lanes = (uint32_t)strtoul(v, NULL, 10);
                else if ((v = option(words[i], "worker"))) options.worker = atoi(v);
                else if ((v = option(words[i], "refused"))) refused = atoi(v);
                else return fail("unknown attach option", words[i]);
            }
            int attached = rs_bot_attach(&bot, name, &options, &error) == 0;
            if (refused && attached) return fail("attach was not refused", name);
            if (!attached && !refused) return fail("attach failed", error.message);
            if (refused) {
                printf("refused %s: %s\n", name, error.message);
                skipping = 1;
            }
        } else if (strcmp(op, "histogram") == 0 || strcmp(op, "counter") == 0 || strcmp(op, "gauge") == 0) {
            if (count < 2 || metric_count == MAX_METRICS) return fail("bad registration", NULL);
            rs_kind kind = op[0] == 'h' ? RS_KIND_HISTOGRAM : op[0] == 'c' ? RS_KIND_COUNTER : RS_KIND_GAUGE;
            rs_unit unit = RS_UNIT_NONE;
            rs_gauge_merge merge = RS_MERGE_LAST;
            const char *help = "";
            /* Labels as stored: "key=value" lines, sorted by key (the case gives them sorted). */
            char labels[RS_LABELS_MAX + 1] = "";
            size_t labels_length = 0;
            uint32_t sample_every = 1;
            rs_values values = {0, 0};
            for (int i = 2; i < count; i++) {
                const char *v;
                if ((v = option(words[i], "unit"))) {
                    if (unit_code(v, &unit) != 0) return fail("unknown unit", v);
                } else if ((v = option(words[i], "merge"))) {
                    if (merge_code(v, &merge) != 0) return fail("unknown merge", v);
                } else if ((v = option(words[i], "help"))) {
                    help = v;
                } else if ((v = option(words[i], "sample_every"))) {
                    sample_every = (uint32_t)strtoul(v, NULL, 10);
                } else if ((v = option(words[i], "scale"))) {
                    values.scale = (int8_t)atoi(v);
                } else if ((v = option(words[i], "signed"))) {
                    values.form = atoi(v) ? RS_FORM_SIGNED : 0;
                } else if ((v = option(words[i], "label")) && labels_length + strlen(v) < RS_LABELS_MAX) {
                    labels_length += (size_t)snprintf(labels + labels_length, sizeof labels - labels_length, "%s%s",
                                                      labels_length ? "\n" : "", v);
                } else {
                    return fail("unknown metric option", words[i]);
                }
            }
            rs_metric *metric = &metrics[metric_count];
            if (rs_bot_register_encoded(bot, metric, words[1], strlen(words[1]), kind, unit, values, labels, labels_length,
                                        help, strlen(help), sample_every, merge, &error) != 0)
                return fail("register failed", error.message);
            snprintf(metric_names[metric_count++], sizeof metric_names[0], "%s", words[1]);
        } else if (strcmp(op, "observe") == 0 || strcmp(op, "observe_value") == 0 || strcmp(op, "count") == 0 ||
                   strcmp(op, "set") == 0) {
            if (count < 3) return fail("missing value", NULL);
            unsigned index = 0;
            while (index < metric_count && strcmp(metric_names[index], words[1]) != 0) index++;
            if (index == metric_count) return fail("unknown metric", words[1]);
            if (op[0] == 's') {
                if (rs_bot_set(bot, metrics[index], strtod(words[2], NULL)) < 0) return fail("set failed", NULL);
            } else if (op[0] == 'c') {
                rs_bot_count(bot, metrics[index], strtoull(words[2], NULL, 10));
            } else if (strcmp(op, "observe_value") == 0) {
                if (rs_bot_record_value(bot, metrics[index], strtod(words[2], NULL)) < 0) return fail("value failed", NULL);
            } else {
                char exemplar[RS_EXEMPLAR_MAX + 1];
                size_t length = 0;
                for (int i = 3; i < count; i++) {
                    const char *v = option(words[i], "exemplar");
                    if (!v || length + (length ? 1 : 0) + strlen(v) > RS_EXEMPLAR_MAX) return fail("bad exemplar", words[i]);
                    length += (size_t)snprintf(exemplar + length, sizeof exemplar - length, "%s%s", length ? "\n" : "", v);
                }
                uint64_t value = strtoull(words[2], NULL, 10);
                int written = length ? rs_bot_record_exemplar(bot, metrics[index], value, exemplar, length)
                                     : rs_bot_record(bot, metrics[index], value);
                if (written < 0) return fail("observe failed", rs_strerror(written));
            }
        } else if (strcmp(op, "retire") == 0 && count == 2) {
            unsigned index = 0;
            while (index < metric_count && strcmp(metric_names[index], words[1]) != 0) index++;
            if (index == metric_count) return fail("unknown metric", words[1]);
            if (rs_bot_retire(bot, metrics[index], &error) != 0) return fail("retire failed", error.message);
        } else if (strcmp(op, "end") == 0 && bot) {
            rs_bot_detach(bot);
            bot = NULL;
        } else {
            return fail("unknown operation", op);
        }
    }
    fclose(cases);
    return bot ? fail("a case without end", name) : 0;
}
