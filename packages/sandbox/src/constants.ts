/** Constants of spec 002 "Limits", exported with the spec's names and values. */

/** Default CPU cores of a box. */
export const DEFAULT_CPUS = 1;
/** Default memory of a box, MiB. */
export const DEFAULT_MEMORY_MIB = 512;
/** CPU cores of a ComputerBox. */
export const COMPUTERBOX_CPUS = 2;
/** Memory of a ComputerBox, MiB. */
export const COMPUTERBOX_MEMORY_MIB = 2048;
/** Display width of a ComputerBox, pixels. */
export const COMPUTERBOX_DISPLAY_WIDTH = 1024;
/** Display height of a ComputerBox, pixels. */
export const COMPUTERBOX_DISPLAY_HEIGHT = 768;
/** Guest HTTP port of the ComputerBox desktop viewer. */
export const COMPUTERBOX_GUI_HTTP_PORT = 3000;
/** Guest HTTPS port of the ComputerBox desktop viewer. */
export const COMPUTERBOX_GUI_HTTPS_PORT = 3001;
/** How long `ComputerBox.waitUntilReady` waits by default, seconds. */
export const DESKTOP_READY_TIMEOUT = 60;
/** Remote-debugging port of a chromium BrowserBox. */
export const BROWSERBOX_PORT_CHROMIUM = 9222;
/** Remote-debugging port of a firefox BrowserBox. */
export const BROWSERBOX_PORT_FIREFOX = 9223;
/** Remote-debugging port of a webkit BrowserBox. */
export const BROWSERBOX_PORT_WEBKIT = 9224;
