warning: image: 'dlk:0.1.0' names no registry, so the nodes look for it on Docker Hub; push the image ('make image' builds it) to a registry the cluster pulls from and set image: REGISTRY/dlk:0.1.0
warning: storage: none, so the checkpoints and the model bundle are written inside the pod and lost with it; set storage.size (a volume dlk creates, e.g. 1Gi) or storage.claim (an existing one)
