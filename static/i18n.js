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
    code: "code",
    "copyCode.before": "",
    "copyCode.after": " the code",
    "copyCodeIn.before": "",
    "copyCodeIn.after": " the {language} code",
    "announce.codeCopied": "Code copied.",
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
    "announce.started": "Generating the answer…",
    "announce.done": "Answer finished.",
    "announce.stopped": "Answer stopped.",
    "announce.alternative": "Alternative {index} of {count}",
    "announce.earlier": "{count} earlier messages shown",
    loadEarlier: "Load earlier messages",
    search: "Search conversations",
    searchPlaceholder: "Search…",
    noResults: "No conversation has those words.",
    loadMore: "Show more",
    renameConversation: "Rename conversation",
    conversationName: "Conversation name",
    edit: "Edit",
    editLabel: "Edit your message",
    saveAndSend: "Save and send",
    cancel: "Cancel",
    alternatives: "Alternatives",
    previousAlternative: "Previous alternative",
    nextAlternative: "Next alternative",
    settings: "Settings",
    settingsTitle: "Conversation settings",
    systemPrompt: "System prompt",
    temperature: "Temperature",
    topP: "Top-p",
    maxTokens: "Max tokens",
    repetitionPenalty: "Repetition penalty",
    frequencyPenalty: "Frequency penalty",
    presencePenalty: "Presence penalty",
    save: "Save",
    settingsSaved: "Settings saved.",
    "settings.default": "Empty: the default, {value}",
    "settings.upstreamDefault": "Empty: the upstream server's default",
    "settings.notApplied": "Not applied by this engine",
    notSignedIn: "Not signed in: your conversations are kept in this browser.",
    signIn: "Sign in",
    signedInAs: "Signed in as {name}",
    signOut: "Sign out",
    loginTitle: "Sign in to the chat",
    loginIntro: "Signed in, your conversations follow you to any browser.",
    username: "Username",
    password: "Password",
    loginFailed: "The username or the password is not right.",
    loginThrottled: "Too many failed sign-ins. Try again in {minutes} min.",
    continueWithout: "Use it without signing in",
    // By error code (streaming/core/exceptions.py, and network_error from api.js); the server's
    // own message is shown under it.
    "error.unknown": "Something went wrong.",
    "error.network_error": "Could not reach the server.",
    "error.invalid_request": "The request was not accepted.",
    "error.unsupported_parameter": "The request asks for something this server does not support.",
    "error.model_not_found": "The server does not serve that model.",
    "error.context_length": "The conversation is too long for the model.",
    "error.body_too_large": "The message is too long to send.",
    "error.unauthorized": "Sign in to use the chat.",
    "error.forbidden": "This is not allowed.",
    "error.not_found": "The server no longer has this answer.",
    "error.conversation_limit": "This conversation, or your conversations, are at their limit.",
    "error.gone": "The server no longer keeps this answer.",
    "error.already_streaming": "This answer is already being read elsewhere.",
    "error.method_not_allowed": "The server refused the request.",
    "error.request_timeout": "The request did not reach the server in time. Try again.",
    "error.rate_limited": "Too many requests. Wait a moment and try again.",
    "error.too_many_streams": "Too many answers at once. Wait for one to end and try again.",
    "error.too_many_background": "Too many answers at once. Wait for one to end and try again.",
    "error.too_many_pending": "Too many answers waiting to start. Try again shortly.",
    "error.no_capacity": "The model is busy. Try again shortly.",
    "error.database_busy": "The server is busy saving other messages. Try again shortly.",
    "error.engine_unavailable": "The model is not available.",
    "error.worker_unavailable": "The model stopped answering.",
    "error.engine_error": "The model failed while writing the answer.",
    "error.timeout": "The answer took too long.",
    "error.server_shutdown": "The server is restarting. Try again.",
    "error.internal_error": "The server failed.",
    "error.cancelled": "The answer was cancelled.",
    "error.client_disconnected": "Nobody was reading the answer, so it was stopped.",
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
    code: "コード",
    "copyCode.before": "コードを",
    "copyCode.after": "",
    "copyCodeIn.before": "{language} のコードを",
    "copyCodeIn.after": "",
    "announce.codeCopied": "コードをコピーしました。",
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
    "announce.started": "回答を生成しています…",
    "announce.done": "回答が完了しました。",
    "announce.stopped": "回答を停止しました。",
    "announce.alternative": "候補 {index} / {count}",
    "announce.earlier": "以前のメッセージを {count} 件表示しました",
    loadEarlier: "以前のメッセージを読み込む",
    search: "会話を検索",
    searchPlaceholder: "検索…",
    noResults: "その言葉を含む会話はありません。",
    loadMore: "さらに表示",
    renameConversation: "会話の名前を変更",
    conversationName: "会話の名前",
    edit: "編集",
    editLabel: "メッセージを編集",
    saveAndSend: "保存して送信",
    cancel: "キャンセル",
    alternatives: "候補",
    previousAlternative: "前の候補",
    nextAlternative: "次の候補",
    settings: "設定",
    settingsTitle: "会話の設定",
    systemPrompt: "システムプロンプト",
    temperature: "温度 (temperature)",
    topP: "Top-p",
    maxTokens: "最大トークン数",
    repetitionPenalty: "繰り返しペナルティ",
    frequencyPenalty: "頻度ペナルティ",
    presencePenalty: "存在ペナルティ",
    save: "保存",
    settingsSaved: "設定を保存しました。",
    "settings.default": "空欄: 既定値 {value}",
    "settings.upstreamDefault": "空欄: 上流サーバーの既定値",
    "settings.notApplied": "このエンジンでは使われません",
    notSignedIn: "ログインしていません: 会話はこのブラウザーに保存されます。",
    signIn: "ログイン",
    signedInAs: "{name} としてログイン中",
    signOut: "ログアウト",
    loginTitle: "チャットにログイン",
    loginIntro: "ログインすると、どのブラウザーからでも同じ会話を使えます。",
    username: "ユーザー名",
    password: "パスワード",
    loginFailed: "ユーザー名またはパスワードが正しくありません。",
    loginThrottled: "ログインの失敗が多すぎます。{minutes} 分後にもう一度お試しください。",
    continueWithout: "ログインせずに使う",
    "error.unknown": "問題が発生しました。",
    "error.network_error": "サーバーに接続できませんでした。",
    "error.invalid_request": "リクエストが受け付けられませんでした。",
    "error.unsupported_parameter": "このサーバーが対応していない指定がリクエストに含まれています。",
    "error.model_not_found": "そのモデルはこのサーバーにありません。",
    "error.context_length": "会話が長すぎてモデルが扱えません。",
    "error.body_too_large": "メッセージが長すぎて送信できません。",
    "error.unauthorized": "チャットを使うにはログインしてください。",
    "error.forbidden": "この操作は許可されていません。",
    "error.not_found": "この回答はサーバーにもうありません。",
    "error.conversation_limit": "この会話、または会話の数が上限に達しています。",
    "error.gone": "この回答はサーバーに保存されていません。",
    "error.already_streaming": "この回答は別の画面で読み込み中です。",
    "error.method_not_allowed": "サーバーがリクエストを拒否しました。",
    "error.request_timeout": "リクエストが時間内にサーバーに届きませんでした。もう一度お試しください。",
    "error.rate_limited": "リクエストが多すぎます。少し待ってからもう一度お試しください。",
    "error.too_many_streams": "同時に生成している回答が多すぎます。終わるのを待ってからお試しください。",
    "error.too_many_background": "同時に生成している回答が多すぎます。終わるのを待ってからお試しください。",
    "error.too_many_pending": "開始待ちの回答が多すぎます。しばらくしてからお試しください。",
    "error.no_capacity": "モデルが混み合っています。しばらくしてからお試しください。",
    "error.database_busy": "サーバーが他のメッセージを保存中です。しばらくしてからお試しください。",
    "error.engine_unavailable": "モデルを利用できません。",
    "error.worker_unavailable": "モデルが応答しなくなりました。",
    "error.engine_error": "回答の生成中にモデルでエラーが起きました。",
    "error.timeout": "回答に時間がかかりすぎました。",
    "error.server_shutdown": "サーバーが再起動中です。もう一度お試しください。",
    "error.internal_error": "サーバーでエラーが起きました。",
    "error.cancelled": "回答はキャンセルされました。",
    "error.client_disconnected": "誰も読んでいなかったため、回答を停止しました。",
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

/** What an error `code` means, in the interface language; a code not in the table gets the
 * generic text (the server's message still shows beside it). */
export function errorText(code) {
  const key = `error.${code}`;
  return key in MESSAGES.en ? t(key) : t("error.unknown");
}

/** Fill the static page's labels (data-i18n and data-i18n-<attribute>) in the chosen language;
 * an element's other data- attributes fill the placeholders (data-name for {name}). */
export function translatePage(root = document) {
  document.documentElement.lang = lang;
  for (const el of root.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n, el.dataset);
  for (const attr of ["placeholder", "aria-label", "title"]) {
    const dataKey = "i18n" + attr.replace(/(^|-)(\w)/g, (_, __, c) => c.toUpperCase());
    for (const el of root.querySelectorAll(`[data-i18n-${attr}]`)) {
      el.setAttribute(attr, t(el.dataset[dataKey]));
    }
  }
  document.title = t(document.body.dataset.pageTitle ?? "appTitle");
}

// Digit grouping and decimal mark per language. Not Intl.NumberFormat: its first use loads the
// locale's data, a main-thread pause longer than a frame in the middle of the first answer.
const NUMBER_MARKS = { en: [",", "."], ja: [",", "."] };

/** A number formatted for the interface language with a fixed number of decimals. */
export function formatNumber(value, decimals = 0) {
  const [group, point] = NUMBER_MARKS[lang];
  const [whole, fraction] = Math.abs(value).toFixed(decimals).split(".");
  const grouped = whole.replace(/\B(?=(\d{3})+$)/g, group);
  const sign = value < 0 && Number(whole + (fraction ?? "")) !== 0 ? "-" : "";
  return sign + grouped + (fraction === undefined ? "" : point + fraction);
}
