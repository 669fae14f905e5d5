/* opts.c - the replay's options (opts.h): its error domain, and the clients' arrangements by
 * name.
 */
#include <string.h>

#include "opts.h"

G_DEFINE_QUARK(gs-replay-error-quark, gs_replay_error)

const char *gs_clients_mode_name(gs_clients_mode m)
{
    static const char *const names[GS_CLIENTS_COUNT] = {"separate", "shared", "cooperative"};
    return m < GS_CLIENTS_COUNT ? names[m] : "?";
}

gboolean gs_clients_mode_parse(const char *s, gs_clients_mode *out)
{
    for (int m = 0; m < GS_CLIENTS_COUNT; m++) {
        if (strcmp(s, gs_clients_mode_name((gs_clients_mode)m)) == 0) {
            *out = (gs_clients_mode)m;
            return TRUE;
        }
    }
    return FALSE;
}
