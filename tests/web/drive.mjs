// Drives a real headless Chromium at a `bernstein-tui web` page (issue #19.10) and
// prints one JSON object: what the terminal received, whether a key reached the app,
// which of the console's glyphs the page's terminal font cannot draw, and a screenshot.
// Usage: node drive.mjs URL CHROMIUM_PATH SCREENSHOT_PATH GLYPHS
import { chromium } from "playwright-core";

const [url, executablePath, screenshot, glyphs] = process.argv.slice(2);
const result = { loaded: false, row: false, key: false, missing: [], errors: [] };
const browser = await chromium.launch({
  executablePath, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  let received = "";
  page.on("websocket", (ws) => {
    ws.on("framereceived", (frame) => {
      const payload = frame.payload;
      received += typeof payload === "string" ? payload : Buffer.from(payload).toString("utf8");
    });
  });
  page.on("pageerror", (error) => result.errors.push(String(error)));
  const plain = () => received.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, "");
  const waitFor = async (test, ms) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (test()) return true;
      await page.waitForTimeout(100);
    }
    return test();
  };
  await page.goto(url, { waitUntil: "load" });
  result.loaded = await waitFor(() => plain().length > 0, 30000);
  result.row = await waitFor(() => plain().includes("DEMO-01"), 60000);
  await page.locator(".textual-terminal").first().click();
  const before = plain().length;
  await page.keyboard.press("?");
  result.key = await waitFor(() => plain().slice(before).includes("Any list"), 20000);
  result.missing = await page.evaluate((text) => {
    const font = "32px 'Roboto Mono', Monaco, 'Courier New', monospace";
    const draw = (ch) => {
      const canvas = document.createElement("canvas");
      canvas.width = 64; canvas.height = 64;
      const ctx = canvas.getContext("2d");
      ctx.font = font; ctx.fillStyle = "#000"; ctx.fillText(ch, 8, 44);
      return Array.from(ctx.getImageData(0, 0, 64, 64).data).join(",");
    };
    const tofu = draw("\u0378");  // unassigned: what a missing glyph looks like
    return [...text].filter((ch) => ch.trim() && draw(ch) === tofu);
  }, glyphs);
  await page.screenshot({ path: screenshot });
  await page.close();
} catch (error) {
  result.errors.push(String(error));
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
