// The report: a table for people (a row per case, the fix under a FAIL or SKIP) and one JSON
// document for machines (--json).
import type { Row } from "./cases.js";

/** The report as one JSON document: the endpoint, whether any case failed or was inconclusive, and the rows. */
export function asJson(url: URL, rows: readonly Row[]): string {
  const failed = rows.some((row) => row.verdict === "FAIL");
  const inconclusive = rows.some((row) => row.verdict === "INCONCLUSIVE");
  return JSON.stringify({ url: url.href, failed, inconclusive, cases: rows }, null, 2);
}

/** The report as a table, with a count line at the end. */
export function asTable(url: URL, rows: readonly Row[]): string {
  const nameWidth = Math.max(4, ...rows.map((row) => row.name.length));
  const verdictWidth = Math.max(7, ...rows.map((row) => row.verdict.length));
  const indent = " ".repeat(2 + 2 + nameWidth + 2 + verdictWidth + 2);
  const lines = [`idempotent-fetch-client check ${url.href}`, "", ` # ${"case".padEnd(nameWidth)}  ${"verdict".padEnd(verdictWidth)}  seen`];
  for (const row of rows) {
    lines.push(`${String(row.id).padStart(2)}  ${row.name.padEnd(nameWidth)}  ${row.verdict.padEnd(verdictWidth)}  ${row.seen}`);
    if (row.fix && row.verdict !== "PASS") lines.push(`${indent}${row.verdict === "FAIL" ? "fix" : "to check it"}: ${row.fix}`);
    if (row.warning) lines.push(`${indent}warning: ${row.warning}`);
  }
  const count = (verdict: Row["verdict"]): number => rows.filter((row) => row.verdict === verdict).length;
  const inconclusive = count("INCONCLUSIVE") ? `, ${count("INCONCLUSIVE")} inconclusive` : "";
  lines.push("", `${count("PASS")} passed, ${count("FAIL")} failed${inconclusive}, ${count("SKIP")} skipped`);
  return lines.join("\n");
}
