# One download job per dataset. It runs where Snakemake runs (login nodes have the internet; compute nodes
# often do not), and it verifies checksums; a corrupt file is fetched again.
localrules:
    download,


rule download:
    output:
        str(ready_marker(CATALOG.data_root, "{dataset}")),
    log:
        str(LAYOUT.log("download", "{dataset}")),
    shell:
        job_shell("download {wildcards.dataset}")
