/* The figure of notebook 09; see draw_serving.h. */
#include "draw_serving.h"

#include <stdio.h>

#include "nb.h"
#include "svg.h"

#define GIB 1073741824.0

int nb09_draw_gpu(const nb09_gpu *g, size_t n, const char *deployment)
{
    const double left = 170, width = 560, top = 78, bar = 22, gap = 14;
    double most = 0;
    for (size_t i = 0; i < n; i++) {
        const double total = g[i].weights + g[i].activations + g[i].cache;
        most = total > most ? total : most;
    }
    svg_doc s;
    svg_begin(&s, 900, top + (double)n * (bar + gap) + 46);
    svg_title(&s, 20, 28, 17, "What one GPU holds, and how many sequences its cache takes");
    svg_text(&s, 20, 50, 12, "start", "%s; weights amber, activations grey, cache blue",
             deployment);
    static const char *const fill[] = {"#e6a35c", "#c8c8c8", "#a9c1e0"};
    for (size_t i = 0; i < n; i++) {
        const double y = top + (double)i * (bar + gap),
                     part[] = {g[i].weights, g[i].activations, g[i].cache};
        svg_text(&s, left - 8, y + bar - 6, 13, "end", "%s", g[i].name);
        double x = left;
        for (int k = 0; k < 3; k++) {
            const double w = part[k] / most * width;
            svg_rect(&s, x, y, w, bar, fill[k]);
            if (w > 40)
                svg_text(&s, x + w / 2, y + bar - 7, 11, "middle", "%s GiB",
                         nb_num(part[k] / GIB, 1));
            x += w;
        }
        svg_text(&s, x + 8, y + bar - 7, 12, "start", "%s seqs/node", nb_num(g[i].sequences, 0));
    }
    svg_end(&s);
    return nb_figure("gpu_memory", &s);
}

int nb09_draw_sequences(const char *const *labels, const double *tp, const double *dp, size_t n,
                        size_t context, const char *deployment)
{
    char title[96], subtitle[200];
    snprintf(title, sizeof title, "Sequences of %s tokens per node, log scale",
             nb_num((double)context, 0));
    snprintf(subtitle, sizeof subtitle,
             "%s; light: tensor-parallel attention, dark: data-parallel attention", deployment);
    svg_doc s;
    svg_pair_bars_log(&s, title, subtitle, labels, tp, dp, n);
    return nb_figure("sequences_per_node", &s);
}
