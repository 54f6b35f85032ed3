// Interface text in Japanese and English; the browser's language list picks one.

// The product's definition (from the article): when a stream ends without [DONE] the page shows
// 「応答が途中で切れました」. So every language shows these words verbatim, whatever the browser's
// language; a language other than Japanese adds its own words after them.
const CUT_NOTICE = "応答が途中で切れました";

const MESSAGES = {
  en: {
    appTitle: "Chat",
    newChat: "New chat",
    conversations: "Conversations",
    messages: "Messages",
    deleteConversation: "Delete conversation",
    emptyTitle: "Ask anything.",
    emptyText: "The answer streams in as the model writes it.",
    promptLabel: "Message",
    placeholder: "Message…",
    send: "Send",
    stop: "Stop",
    hint: "Enter to send · Shift+Enter for a new line · Esc to stop",
    you: "You",
    assistant: "Assistant",
    copy: "Copy",
    copied: "Copied",
    copyFailed: "Copy failed",
    regenerate: "Regenerate",
    "state.waiting": "Waiting for the first token…",
    "state.streaming": "Generating…",
    "state.stopping": "Stopping…",
    "state.done": "Finished",
    "state.length": "Finished at the length limit",
    "state.stopped": "Stopped",
    "state.cut": `${CUT_NOTICE} — The response was cut off`,
    "state.refused": "Could not open the stream",
    "state.error": "Error: {message}",
    "state.stalled": "No token for {seconds} s…",
    "stat.ttft": "TTFT {ms} ms",
    "stat.tps": "{tps} tokens/s",
    "stat.tokens": "{count} tokens",
    thinking: "Thinking · {count} tokens",
    "stat.finish": "finish: {reason}",
    timelineLabel: "Token arrivals: {count} over {seconds} s, longest gap {gap} ms",
    startFailed: "Could not start: {message}",
    "announce.done": "Answer finished.",
    "announce.stopped": "Answer stopped.",
  },
  ja: {
    appTitle: "チャット",
    newChat: "新しいチャット",
    conversations: "会話履歴",
    messages: "メッセージ",
    deleteConversation: "会話を削除",
    emptyTitle: "何でも聞いてください。",
    emptyText: "モデルが書いたそばから回答が表示されます。",
    promptLabel: "メッセージ",
    placeholder: "メッセージを入力…",
    send: "送信",
    stop: "停止",
    hint: "Enter で送信 · Shift+Enter で改行 · Esc で停止",
    you: "あなた",
    assistant: "アシスタント",
    copy: "コピー",
    copied: "コピーしました",
    copyFailed: "コピーできませんでした",
    regenerate: "再生成",
    "state.waiting": "最初のトークンを待っています…",
    "state.streaming": "生成中…",
    "state.stopping": "停止しています…",
    "state.done": "完了",
    "state.length": "長さの上限で終了",
    "state.stopped": "停止しました",
    "state.cut": CUT_NOTICE,
    "state.refused": "ストリームを開けませんでした",
    "state.error": "エラー: {message}",
    "state.stalled": "{seconds} 秒間トークンが届いていません…",
    "stat.ttft": "TTFT {ms} ms",
    "stat.tps": "{tps} トークン/秒",
    "stat.tokens": "{count} トークン",
    thinking: "思考 · {count} トークン",
    "stat.finish": "終了理由: {reason}",
    timelineLabel: "トークン到着: {seconds} 秒間に {count} 個、最大間隔 {gap} ms",
    startFailed: "開始できませんでした: {message}",
    "announce.done": "回答が完了しました。",
    "announce.stopped": "回答を停止しました。",
  },
};

/** The first supported language in the browser's preference list, else English. */
export function pickLanguage(tags) {
  for (const tag of tags) {
    const base = String(tag).toLowerCase().split("-")[0];
    if (base in MESSAGES) return base;
  }
  return "en";
}

export const lang = pickLanguage(navigator.languages?.length ? navigator.languages : [navigator.language]);

/** The text for `key` with `{name}` placeholders filled from `vars`. */
export function t(key, vars = {}) {
  const text = MESSAGES[lang][key] ?? MESSAGES.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

/** Fill the static page's labels (data-i18n and data-i18n-<attribute>) in the chosen language. */
export function translatePage(root = document) {
  document.documentElement.lang = lang;
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const attr of ["placeholder", "aria-label", "title"]) {
    const dataKey = "i18n" + attr.replace(/(^|-)(\w)/g, (_, __, c) => c.toUpperCase());
    for (const el of root.querySelectorAll(`[data-i18n-${attr}]`)) {
      el.setAttribute(attr, t(el.dataset[dataKey]));
    }
  }
  document.title = t("appTitle");
}

const numberFormats = new Map();

/** A number formatted for the interface language with a fixed number of decimals. */
export function formatNumber(value, decimals = 0) {
  if (!numberFormats.has(decimals)) {
    numberFormats.set(decimals, new Intl.NumberFormat(lang, {
      minimumFractionDigits: decimals,
      maximumFractionDigits: decimals,
    }));
  }
  return numberFormats.get(decimals).format(value);
}
