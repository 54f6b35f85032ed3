// The chat's sign-in page: its labels in the browser's language, as the chat page's.

import { translatePage } from "./i18n.js";

translatePage();
