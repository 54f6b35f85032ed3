// The person's tokens and token budgets (GET /api/usage): the settings' Usage section, fetched
// each time the dialog opens (never on the token path), and the words for a send that a budget
// refuses, from the refusal's figures rather than the server's English.

import { ApiError, fetchUsage } from "./api.js";
import { formatDateTime, formatNumber, t } from "./i18n.js";

// Today and the 30 days before: every day of the current month, whatever the date.
export const USAGE_DAYS = 31;

/** "2026-11-07" plus `days` days, as the same kind of text. */
function addDays(isoDay, days) {
  const [year, month, day] = isoDay.split("-").map(Number);
  return new Date(Date.UTC(year, month - 1, day + days)).toISOString().slice(0, 10);
}

/** The report's tokens today and this month, in all and per model (most this month first).
 * "Today" is the server's: its window of USAGE_DAYS days ends with it. */
export function usageSummary(report) {
  const today = addDays(report.since, USAGE_DAYS - 1);
  const month = today.slice(0, 7);
  const total = { today: 0, month: 0 };
  const models = new Map();
  for (const row of report.days ?? []) {
    if (!row.day?.startsWith(month)) continue;
    const tokens = row.total_tokens ?? 0;
    const model = row.model ?? "";
    const figures = models.get(model) ?? { model, today: 0, month: 0 };
    figures.month += tokens;
    total.month += tokens;
    if (row.day === today) {
      figures.today += tokens;
      total.today += tokens;
    }
    models.set(model, figures);
  }
  return { total, models: [...models.values()].sort((a, b) => b.month - a.month) };
}

/** Which budget, in the page's language: "Daily budget of user alice". */
export function budgetName(budget) {
  return t(budget.period === "month" ? "budget.month" : "budget.day", { scope: budget.scope });
}

/** When a budget starts again, in the browser's time zone. */
function resetTime(budget) {
  return formatDateTime(new Date(budget.resets_at));
}

/** A refusal in the page's words where its figures allow (`budget_exceeded`): the same error
 * with its message replaced; any other error as it is. */
export function inPageWords(error) {
  const budget = error?.details?.budget;
  if (error?.code !== "budget_exceeded" || !budget) return error;
  const message = t("budget.refused", {
    budget: budgetName(budget),
    used: formatNumber(budget.used),
    tokens: formatNumber(budget.tokens),
    when: resetTime(budget),
  });
  return new ApiError(error.status, error.code, message, error.details);
}

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

export class UsageSection {
  /** `root`: the settings dialog's Usage section (index.html). */
  constructor(root) {
    this.root = root;
    this.status = root.querySelector(".usage-status");
    this.table = root.querySelector(".usage-table");
    this.rows = this.table.querySelector("tbody");
    this.noBudget = root.querySelector(".usage-no-budget");
    this.budgets = root.querySelector(".usage-budgets");
    this.asked = 0; // the latest fetch: an earlier one that answers after it is dropped
  }

  /** Fetch the person's usage again and show it (the dialog has just opened). */
  async refresh() {
    const asked = ++this.asked;
    this.root.setAttribute("aria-busy", "true");
    this.#say(t("usage.loading"));
    let report;
    try {
      report = await fetchUsage(USAGE_DAYS);
    } catch {
      if (asked === this.asked) {
        this.#say(t("usage.failed"));
        this.root.setAttribute("aria-busy", "false");
      }
      return;
    }
    if (asked !== this.asked) return;
    this.#show(usageSummary(report), report.budgets ?? []);
    this.root.setAttribute("aria-busy", "false");
  }

  /** A line instead of the figures (loading, failed). */
  #say(text) {
    this.status.textContent = text;
    this.status.hidden = false;
    this.table.hidden = true;
    this.noBudget.hidden = true;
    this.budgets.hidden = true;
  }

  #show({ total, models }, budgets) {
    this.status.hidden = true;
    // One row per model only where there are several; else the total says it all.
    const perModel = models.length > 1 ? models : [];
    this.rows.replaceChildren(
      this.#row(t("usage.total"), total, "total"),
      ...perModel.map((figures) => this.#row(figures.model || t("usage.noModel"), figures, "model")),
    );
    this.table.hidden = false;
    this.noBudget.hidden = budgets.length > 0;
    this.budgets.replaceChildren(...budgets.map((budget) => this.#budget(budget)));
    this.budgets.hidden = budgets.length === 0;
  }

  #row(name, figures, kind) {
    const row = element("tr", `usage-row usage-row-${kind}`);
    const head = element("th", "", name);
    head.scope = "row";
    row.append(head, element("td", "usage-today", formatNumber(figures.today)),
      element("td", "usage-month", formatNumber(figures.month)));
    return row;
  }

  #budget(budget) {
    const item = element("li", "usage-budget");
    item.dataset.budgetId = String(budget.id);
    item.append(
      element("span", "usage-budget-name", budgetName(budget)),
      ": ",
      element("span", "usage-budget-left", t("budget.left", {
        left: formatNumber(budget.left),
        tokens: formatNumber(budget.tokens),
        when: resetTime(budget),
      })),
    );
    return item;
  }
}
