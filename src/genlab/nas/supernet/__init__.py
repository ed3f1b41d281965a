"""The supernet's parts that every cell space builds from: the candidate operations and their
registry (ops), the generic per-edge search cell and cell topologies (cells), the in-place
weighted node sums of the fused supernets (nodesum), probes of what the search cells compute
(probe), and the size of a network (model_cost). The spaces (genlab.nas.spaces) assemble them
into their supernets and networks."""
