/*
 * browser: --browser (browser.c).
 */
#ifndef PYSTROBE_CLI_BROWSER_H
#define PYSTROBE_CLI_BROWSER_H

/* Start a browser on the file at path ($BROWSER, else xdg-open), without
 * waiting for it. 0, or -1 after saying why on stderr. */
int cli_open_browser(const char *path);

#endif
