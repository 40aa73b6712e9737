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


# The rehearsal scale's adapter backbones (scale_map.generated_data): generated files at the pretrained.<arch> paths,
# never at a scale that reads real data, where those files are the user's.
if CATALOG.config["scale_map"].get("generated_data"):

    rule generate_backbone:
        output:
            str(CATALOG.data_root / "pretrained" / "{arch}.pth"),
        log:
            str(LAYOUT.log("download", "backbone-{arch}")),
        shell:
            job_shell("generate-backbone {wildcards.arch}")
