"""The live dashboard on the monitoring port (pynatsd only: nats-server has no such page).

`snapshot` gathers what the page shows from the monitoring endpoints' own data functions,
`feed` sends it to every open page over Server-Sent Events about once a second (and does nothing
while no page is open), `assets` serves the page's HTML, script and style from the package.
"""
