"""The page's inline style: a fixed table of contents on the left (on top, collapsed, on a narrow screen)."""

STYLE = """
:root { --ok: #1a7f37; --bad: #b42318; --muted: #57606a; --line: #d0d7de; --soft: #f6f8fa; --paper: #fbf6e9;
        --side: 272px; }
* { box-sizing: border-box; }
html { scroll-padding-top: 12px; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; }
nav.toc { position: fixed; top: 0; left: 0; bottom: 0; width: var(--side); overflow-y: auto; padding: 14px 12px 32px;
          background: var(--soft); border-right: 1px solid var(--line); font-size: 13.5px; }
nav.toc summary { font-weight: 600; font-size: 15px; color: #1f2328; margin-bottom: 6px; }
nav.toc h4 { margin: 14px 0 4px; font-size: 12px; text-transform: uppercase; letter-spacing: .04em;
             color: var(--muted); }
nav.toc ol { list-style: none; margin: 0; padding: 0; }
nav.toc li { margin: 0; }
nav.toc a { display: flex; justify-content: space-between; gap: 6px; padding: 2px 6px; border-radius: 4px;
            text-decoration: none; color: #1f2328; overflow-wrap: anywhere; }
nav.toc a:hover { background: #eaeef2; }
nav.toc .badge { margin-left: 0; flex: none; align-self: center; }
main { margin-left: var(--side); padding: 16px 28px 64px; max-width: calc(var(--side) + 1180px); min-width: 0; }
@media (max-width: 900px) {
  nav.toc { position: static; width: auto; border-right: 0; border-bottom: 1px solid var(--line); padding: 8px 14px; }
  nav.toc ol { columns: 2 14em; column-gap: 12px; }
  table.overview .what { display: none; }
  main { margin-left: 0; padding: 12px 14px 48px; }
  .columns { grid-template-columns: 1fr !important; }
}
h1 { font-size: 26px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 0 0 4px; overflow-wrap: anywhere; }
h2.group { font-size: 14px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted);
           margin: 44px 0 0; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 20px 0 6px; }
h4, h5 { font-size: 14.5px; margin: 16px 0 4px; }
a { color: #0969da; }
code { font-size: 90%; background: var(--soft); padding: 0 3px; border-radius: 3px; overflow-wrap: anywhere; }
pre { background: var(--soft); padding: 8px; overflow-x: auto; font-size: 13px; }
.muted { color: var(--muted); overflow-wrap: anywhere; }
section.result { border-top: 3px solid var(--line); margin-top: 28px; padding-top: 14px; }
section.result > p, section.result li { max-width: 70em; }
nav.pager { font-size: 13px; margin: 4px 0 10px; }
nav.pager a { margin-right: 14px; }
.badge { display: inline-block; font-size: 12px; padding: 1px 8px; border-radius: 10px; margin-left: 6px;
         border: 1px solid var(--line); background: #fff; vertical-align: middle; font-weight: 500;
         white-space: nowrap; }
.badge.ok { color: #fff; background: var(--ok); border-color: var(--ok); }
.badge.bad { color: #fff; background: var(--bad); border-color: var(--bad); }
.scroll { overflow-x: auto; margin: 6px 0 4px; max-width: 100%; }
table { border-collapse: collapse; font-size: 13.5px; }
caption { text-align: left; font-weight: 600; padding: 4px 0; }
th, td { border: 1px solid var(--line); padding: 4px 8px; vertical-align: top; }
th { background: var(--soft); text-align: left; }
th.num { text-align: right; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
th.paper { background: #f3ead0; }
td.paper { background: var(--paper); color: #4d3b00; }
tr.held td.verdict { color: var(--ok); font-weight: 600; }
tr.missed td.verdict { color: var(--bad); font-weight: 600; }
td.verdict { white-space: nowrap; }
p.note { font-size: 13px; color: var(--muted); margin: 2px 0 12px; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 28px; }
ul.compact { margin: 4px 0; padding-left: 20px; font-size: 13.5px; }
ul.compact li { margin: 2px 0; }
figure { margin: 14px 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { font-size: 13px; color: var(--muted); }
.charts { display: flex; flex-wrap: wrap; gap: 0 24px; align-items: flex-start; }
details { margin: 6px 0; font-size: 13.5px; }
summary { cursor: pointer; color: var(--muted); }
.callout { border-left: 4px solid #bf8700; background: #fff8c5; padding: 6px 12px; margin: 8px 0; }
.choice { border-left: 4px solid var(--ok); background: #dafbe1; padding: 6px 12px; margin: 8px 0; }
table.unreadable td:first-child { overflow-wrap: anywhere; }
"""
